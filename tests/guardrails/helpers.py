"""Shared helpers for the guardrails tests."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from dra_constructs.guardrails import AuditResult, audit, load_paths

FIXTURES = Path(__file__).parent / "fixtures"
_EXPECT = re.compile(r"^#\s*expect(-warnings)?:\s*(.*)$", re.MULTILINE)
_TARGET = re.compile(r"^#\s*target:\s*(\S+)\s*$", re.MULTILINE)


#: JSON has no comments: the expectations of JSON fixtures live here.
_JSON_EXPECTATIONS = {
    "unused-pod-claim-list.json": ({"DRA005"}, set()),
    "kind-list.json": (set(), {"DRA016"}),  # two H200s with no NUMA alignment
}
#: Targets of JSON fixtures (YAML fixtures say ``# target: 1.34``); the default is 1.32.
_JSON_TARGETS = {"kind-list.json": "1.34"}


def expectations(path: Path) -> tuple[set[str], set[str]]:
    """``(error rule ids, warning rule ids)`` declared in a fixture's ``# expect:`` header lines."""
    if path.suffix == ".json":
        errors_json, warnings_json = _JSON_EXPECTATIONS[path.name]
        return set(errors_json), set(warnings_json)
    errors: set[str] = set()
    warnings: set[str] = set()
    for match in _EXPECT.finditer(path.read_text()):
        (warnings if match.group(1) else errors).update(match.group(2).split())
    return errors, warnings


def fixture_target(path: Path) -> str:
    """The Kubernetes version a fixture is written for: its ``# target:`` header, else 1.32."""
    if path.suffix == ".json":
        return _JSON_TARGETS.get(path.name, "1.32")
    match = _TARGET.search(path.read_text()) if path.is_file() else None
    return match.group(1) if match else "1.32"


def audit_file(path: Path, version: str | None = None) -> AuditResult:
    return audit(load_paths([str(path)]), kubernetes_version=version or fixture_target(path))


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def rules_of(result: AuditResult, severity: str | None = None) -> set[str]:
    return {f.rule for f in result.findings if severity is None or f.severity.value == severity}


def pod(spec: dict[str, Any], name: str = "p", namespace: str = "ml", **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, **metadata},
            "spec": spec}


def claim_template(requests: list[dict[str, Any]], name: str = "t", namespace: str = "ml",
                   version: str = "v1beta1", **devices: Any) -> dict[str, Any]:
    return {"apiVersion": f"resource.k8s.io/{version}", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": requests, **devices}}}}


PINNED_MIG = "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"
PINNED_GPU = ("device.attributes['gpu.nvidia.com'].architecture == 'Hopper' && "
              "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('79113Mi')) >= 0")


def mig_request(name: str = "gpu", **extra: Any) -> dict[str, Any]:
    return {"name": name, "deviceClassName": "mig.nvidia.com", "allocationMode": "ExactCount", "count": 1,
            "selectors": [{"cel": {"expression": PINNED_MIG}}], **extra}


def gpu_pod_spec(claim: str = "gpu", template: str = "t", **extra: Any) -> dict[str, Any]:
    """A compliant GPU pod spec using template ``template``."""
    return {
        "terminationGracePeriodSeconds": 60,
        "resourceClaims": [{"name": claim, "resourceClaimTemplateName": template}],
        "containers": [{"name": "app", "image": "python:3.12", "resources": {"claims": [{"name": claim}]}}],
        **extra,
    }


def field_paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``node`` (keys and list indexes), the node's own first."""
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += field_paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += field_paths(value, (*prefix, i))
    return out


def write_export(tmp_path: Path, items: list[Any], name: str = "export.json") -> Path:
    """``items`` as a ``kubectl get -o json`` export (a ``List``, indented as kubectl prints it) in ``tmp_path``."""
    path = tmp_path / name
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                                "items": items}, indent=4, ensure_ascii=False))
    return path
