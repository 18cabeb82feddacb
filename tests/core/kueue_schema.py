"""Validate Kueue objects against Kueue's own CRDs (``../shared/schemas/kueue``, never copied here).

The CRD's ``openAPIV3Schema`` is checked with ``jsonschema`` (strictly: an unknown field is an
error here, where the API server would prune it silently), then every ``x-kubernetes-validations``
rule that does not compare with ``oldSelf`` is evaluated with a real CEL engine on its value.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jsonschema
import yaml
from cel_expr_python import cel
from shared_data import shared_path

_ENV = cel.NewEnv(variables={"self": cel.Type.DYN})


@cache
def _crds() -> dict[tuple[str, str], dict[str, Any]]:
    """``(apiVersion, kind)`` -> openAPIV3Schema of every served version."""
    schemas = shared_path("schemas/kueue", "Kueue CRD schemas")  # skips (fails under CI) without ../shared
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(schemas.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if version.get("served"):
                out[(f"{group}/{version['name']}", kind)] = version["schema"]["openAPIV3Schema"]
    return out


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy where objects with listed properties refuse unlisted ones (except metadata)."""
    out = dict(schema)
    if "properties" in out:
        out["properties"] = {k: _strict(v) for k, v in out["properties"].items()}
        if "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = _strict(out[key])
    for key in ("anyOf", "allOf", "oneOf"):
        if isinstance(out.get(key), list):
            out[key] = [_strict(s) for s in out[key]]
    return out


def _cel_rules(schema: dict[str, Any], value: Any, path: str) -> list[str]:
    errors: list[str] = []
    for rule in schema.get("x-kubernetes-validations", []):
        if "oldSelf" in rule["rule"]:
            continue  # transition rules need the stored object
        result = _ENV.compile(rule["rule"]).eval(data={"self": value})
        if result.type() == cel.Type.ERROR or result.plain_value() is not True:
            errors.append(f"{path}: {rule.get('message', rule['rule'])} ({result.value()})")
    if isinstance(value, dict):
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                errors += _cel_rules(sub, value[key], f"{path}.{key}")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            errors += _cel_rules(schema["items"], item, f"{path}[{i}]")
    return errors


def validate_kueue(doc: dict[str, Any]) -> None:
    """Raise if ``doc`` is not a valid Kueue object of a served version."""
    schema = _crds().get((doc.get("apiVersion", ""), doc.get("kind", "")))
    if schema is None:
        raise ValueError(f"no Kueue CRD serves {doc.get('apiVersion')} {doc.get('kind')}")
    strict = _strict(schema)
    strict["properties"]["metadata"] = {"type": "object"}
    jsonschema.validate(doc, strict)
    errors = _cel_rules(schema, doc, doc["kind"])
    if errors:
        raise ValueError("; ".join(errors))
