"""Builders for fit tests, and the rule that every allocation a test sees is validated."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dra_constructs.catalog import catalog_resource_slices
from dra_constructs.fit import (
    AllocatedState,
    Claim,
    DeviceClass,
    FitReport,
    Inventory,
    claim_from_spec,
    default_device_classes,
    fit,
    validate_allocation,
)
from dra_constructs.target import Target

PROFILE = "device.attributes['gpu.nvidia.com'].profile == '{}'"


def request(name: str = "r", device_class: str = "mig.nvidia.com", selectors: Sequence[str] = (),
            count: int = 1, **extra: Any) -> dict[str, Any]:
    """One v1 request (``exactly``)."""
    body: dict[str, Any] = {"deviceClassName": device_class, "count": count, **extra}
    if selectors:
        body["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": body}


def claim(name: str, *requests: dict[str, Any], constraints: Sequence[dict[str, Any]] = ()) -> Claim:
    spec: dict[str, Any] = {"devices": {"requests": list(requests)}}
    if constraints:
        spec["devices"]["constraints"] = list(constraints)
    return claim_from_spec(name, spec, name)


def mig(name: str, profile: str, count: int = 1) -> Claim:
    return claim(name, request("mig", selectors=[PROFILE.format(profile)], count=count))


def dynamic(model: str = "A100_80GB", gpus: int = 1, version: str = "1.36") -> Inventory:
    target = Target.parse(version)
    return Inventory.from_slices(catalog_resource_slices(
        [model], gpus_per_node=gpus, mig_mode="dynamic", split_counter_sets=target.counter_sets_in_own_slice))


def counter_node(devices: Sequence[tuple[str, str, str, int]], slots: int = 4) -> Inventory:
    """One node, one counter set ``cs`` of ``slots``; devices (name, model, parent, slots consumed), in
    the 1.35+ layout (the counter set in a slice of its own)."""
    pool = {"name": "n", "generation": 1, "resourceSliceCount": 2}
    raw = [{"name": name, "attributes": {"model": {"string": model}, "parent": {"string": parent}},
            "consumesCounters": [{"counterSet": "cs", "counters": {"slots": {"value": str(used)}}}]}
           for name, model, parent, used in devices]
    return Inventory.from_slices([
        {"kind": "ResourceSlice", "metadata": {"name": "counters"}, "spec": {
            "driver": "gpu.nvidia.com", "nodeName": "n", "pool": pool,
            "sharedCounters": [{"name": "cs", "counters": {"slots": {"value": str(slots)}}}]}},
        {"kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": {
            "driver": "gpu.nvidia.com", "nodeName": "n", "pool": pool, "devices": raw}}])


def checked_fit(claims: Sequence[Claim], inventory: Inventory, version: str = "1.36", *,
                classes: Mapping[str, DeviceClass] | None = None, gates: Mapping[str, bool] | None = None,
                allocated: AllocatedState | None = None, **options: Any) -> FitReport:
    """``fit``, then every returned allocation through the independent validator."""
    target = Target.parse(version)
    classes = dict(classes) if classes is not None else default_device_classes()
    gates = dict(gates) if gates is not None else target.default_feature_gates
    report = fit(claims, inventory, target=target, classes=classes, gates=gates, allocated=allocated, **options)
    nodes = {n.name: n for n in inventory.nodes}
    for name, result in report.nodes.items():
        if result.allocatable:
            problems = validate_allocation(claims, inventory, nodes[name], result.devices, classes=classes,
                                           target=target, allocated=allocated, gates=gates)
            assert problems == [], (name, problems)
        else:
            assert result.devices == [] and result.reason
    return report


def only(report: FitReport) -> Any:
    (result,) = report.nodes.values()
    return result


#: A class every device matches, and a selector on the ``model`` attribute of ``counter_node`` devices.
ANY = {"any.example.com": DeviceClass("any.example.com", ())}
MODEL = "device.attributes['gpu.nvidia.com'].model == '{}'"


def refused_counter_leak(x_count: int) -> tuple[Inventory, list[Claim]]:
    """The node and claim where a device refused by matchAttribute after taking its counters matters.

    d0 (a, parent p0, 1 slot), d1 (a, p1, 3 slots), d2 (b, p0, 2), d3 (b, p0, 1) of 4 slots; one claim:
    ``firstAvailable`` [x: ``x_count`` of a, y: 1 of b] and 1 of b, all on one parent.
    """
    inventory = counter_node([("d0", "a", "p0", 1), ("d1", "a", "p1", 3), ("d2", "b", "p0", 2),
                              ("d3", "b", "p0", 1)])
    claims = [claim("c", {"name": "r0", "firstAvailable": [
        {"name": "x", "deviceClassName": "any.example.com", "count": x_count,
         "selectors": [{"cel": {"expression": MODEL.format("a")}}]},
        {"name": "y", "deviceClassName": "any.example.com", "count": 1,
         "selectors": [{"cel": {"expression": MODEL.format("b")}}]}]},
        request("r1", "any.example.com", [MODEL.format("b")]),
        constraints=[{"matchAttribute": "gpu.nvidia.com/parent"}])]
    return inventory, claims
