"""DRA011: API versions and fields the target Kubernetes version does not serve, and deprecated versions.

The facts (which minor added, deprecated or removed what) live in :mod:`dra_constructs.target`;
this rule only knows where each field sits in the objects.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.facets import RESOURCE_API
from dra_constructs.guardrails.manifest import Manifest, as_dict, as_list, field_path
from dra_constructs.guardrails.model import Hit, Rule, Severity
from dra_constructs.target import DRA_FIELDS, Target

__all__ = ["RULE"]

#: Per-device fields of a ResourceSlice (v1beta1 keeps them under ``basic``), by field id.
_DEVICE_FIELDS = ("consumesCounters", "nodeName", "nodeSelector", "allNodes", "taints", "bindsToNode",
                  "bindingConditions", "bindingFailureConditions", "allowMultipleAllocations")


def _field_hit(target: Target, field_id: str, path: str, shown: str) -> Iterator[Hit]:
    if target.has_dra_field(field_id):
        return
    fact = DRA_FIELDS[field_id]
    if fact.removed is not None and target.minor >= fact.removed:
        yield Hit(path, f"{shown} was removed in 1.{fact.removed}: the API server of Kubernetes {target} "
                        "rejects it",
                  fix=f"drop {shown} (it was {fact.describe()})")
        return
    yield Hit(path, f"{shown} is {fact.describe()}: the API server of Kubernetes {target} does not know it "
                    "(strict field validation rejects the object, a lenient client drops the field)",
              fix=f"remove {shown}, or audit and build for the cluster's version (1.{fact.introduced}+) with "
                  "--kubernetes-version / set_kubernetes_version")


def _api_hits(m: Manifest, target: Target) -> Iterator[Hit]:
    fact = target.api_version_fact(m.api_version, m.kind)
    if fact is None:
        return
    if target.minor < fact.introduced:
        instead = (target.device_taint_rule_api_version if m.kind == "DeviceTaintRule"
                   else target.resource_api_version)
        fix = (f"write apiVersion: {instead}" if instead else
               f"Kubernetes {target} has no {m.kind}; drop the object")
        yield Hit("apiVersion", f"{m.kind} {m.api_version} exists from Kubernetes 1.{fact.introduced}: the API "
                                f"server of Kubernetes {target} does not serve it",
                  fix=f"{fix}, or audit and build for the cluster's version with --kubernetes-version")
    elif fact.removed is not None and target.minor >= fact.removed:
        yield Hit("apiVersion", f"{m.api_version} was removed in Kubernetes 1.{fact.removed}",
                  fix=f"write apiVersion: {target.resource_api_version}")
    elif fact.deprecated is not None and target.minor >= fact.deprecated:
        newest = (target.device_taint_rule_api_version if m.kind == "DeviceTaintRule"
                  else target.resource_api_version)
        yield Hit("apiVersion", f"{m.api_version} is deprecated since Kubernetes 1.{fact.deprecated} and removed "
                                f"in 1.{fact.removed}; from 1.34 the beta versions are not served unless "
                                "enabled with --runtime-config",
                  severity=Severity.WARNING, fix=f"write apiVersion: {newest}")


def _claim_hits(m: Manifest, target: Target) -> Iterator[Hit]:
    if m.claim_spec is None:
        return
    spec, base = m.claim_spec
    devices = as_dict(spec.get("devices"))
    for i, raw in enumerate(as_list(devices.get("requests"))):
        if "firstAvailable" in as_dict(raw):
            yield from _field_hit(target, "request.firstAvailable",
                                  field_path(base, "devices", "requests", i, "firstAvailable"), "firstAvailable")
    for request in m.requests():
        for key in ("tolerations", "capacity"):
            if key in request.fields:
                shown = "capacity.requests" if key == "capacity" else key
                yield from _field_hit(target, f"request.{key}", field_path(request.path, key), shown)
    for i, constraint in enumerate(as_list(devices.get("constraints"))):
        if "distinctAttribute" in as_dict(constraint):
            yield from _field_hit(target, "constraint.distinctAttribute",
                                  field_path(base, "devices", "constraints", i, "distinctAttribute"),
                                  "distinctAttribute")


def _taint_effect_hit(target: Target, taint: Any, path: str) -> Iterator[Hit]:
    if as_dict(taint).get("effect") == "None":
        yield from _field_hit(target, "taint.effect.None", field_path(path, "effect"), "taint effect None")


def _slice_hits(m: Manifest, target: Target) -> Iterator[Hit]:
    spec = as_dict(m.obj.get("spec"))
    for key in ("sharedCounters", "perDeviceNodeSelection"):
        if key in spec:
            yield from _field_hit(target, f"slice.{key}", field_path("spec", key), key)
    for i, raw in enumerate(as_list(spec.get("devices"))):
        device = as_dict(raw)
        places = [(field_path("spec", "devices", i), device)]
        if isinstance(device.get("basic"), dict):
            places.append((field_path("spec", "devices", i, "basic"), device["basic"]))
        for path, fields in places:
            for key in _DEVICE_FIELDS:
                if key in fields:
                    yield from _field_hit(target, f"device.{key}", field_path(path, key), key)
            for j, taint in enumerate(as_list(fields.get("taints"))):
                yield from _taint_effect_hit(target, taint, field_path(path, "taints", j))
            for name, capacity in as_dict(fields.get("capacity")).items():
                if isinstance(name, str) and "requestPolicy" in as_dict(capacity):
                    yield from _field_hit(target, "capacity.requestPolicy",
                                          field_path(path, "capacity", name, "requestPolicy"), "requestPolicy")


def _taint_rule_hits(m: Manifest, target: Target) -> Iterator[Hit]:
    spec = as_dict(m.obj.get("spec"))
    selector = as_dict(spec.get("deviceSelector"))
    for key in ("deviceClassName", "selectors"):
        if key in selector:
            yield from _field_hit(target, f"deviceTaintRule.deviceSelector.{key}",
                                  field_path("spec", "deviceSelector", key), f"deviceSelector.{key}")
    yield from _taint_effect_hit(target, spec.get("taint"), "spec.taint")


def _check(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    if not m.is_resource_api:
        return
    target = ctx.target
    yield from _api_hits(m, target)
    yield from _claim_hits(m, target)
    if m.kind == "DeviceClass" and "extendedResourceName" in as_dict(m.obj.get("spec")):
        yield from _field_hit(target, "deviceClass.extendedResourceName", "spec.extendedResourceName",
                              "extendedResourceName")
    elif m.kind == "ResourceSlice":
        yield from _slice_hits(m, target)
    elif m.kind == "DeviceTaintRule":
        yield from _taint_rule_hits(m, target)


RULE = Rule(
    id="DRA011",
    name="served-by-target-version",
    severity=Severity.ERROR,
    why="an API version or field newer than the cluster is rejected (or silently dropped) by its API server; "
        "deprecated versions stop being served in a known release",
    fix="write the API version and fields of the target Kubernetes version (--kubernetes-version / "
        "set_kubernetes_version), or raise the target to the cluster's real version",
    object_check=_check,
    # facets: returns at once unless is_resource_api
    fires_on=RESOURCE_API,
)
