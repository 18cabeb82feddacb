"""``requestPolicy`` binds on unshared devices too while DRAConsumableCapacity is on (issue 24, item 2).

Upstream (``structured/internal/incubating/allocator_incubating.go``, v0.36-v0.37): after
``isSelectable``, ``if alloc.features.ConsumableCapacity { CmpRequestOverCapacity(...) }`` runs
for every device, whatever ``allowMultipleAllocations`` says; ``CmpRequestOverCapacity``
(``consumable_capacity.go``) refuses a rounded amount that ``violatesPolicy`` or that exceeds the
capacity, and errs (the device is skipped) for a requested capacity the device lacks.
"""

from __future__ import annotations

from typing import Any

from dra_constructs.fit import Claim, Inventory, default_device_classes, validate_allocation
from dra_constructs.fit.allocator import DeviceResult
from dra_constructs.target import Target

from .helpers import checked_fit, claim, only, request

POLICY = {"validRange": {"min": "10Gi", "max": "40Gi", "step": "10Gi"}}


def exclusive(policy: dict[str, Any] | None = POLICY, default: str | None = None) -> Inventory:
    """One node, one *unshared* GPU (no allowMultipleAllocations) with 80Gi of memory."""
    memory: dict[str, Any] = {"value": "80Gi"}
    if policy is not None:
        memory["requestPolicy"] = {**policy, **({"default": default} if default else {})}
    return Inventory.from_slices([{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                   "metadata": {"name": "s"}, "spec": {
        "driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}, "capacity": {"memory": memory}}]}}])


def asking(memory: str | None, name: str = "memory") -> Claim:
    extra: dict[str, Any] = {"capacity": {"requests": {name: memory}}} if memory is not None else {}
    return claim("c", request("gpu", device_class="gpu.nvidia.com", **extra))


def test_a_request_above_the_policy_maximum_does_not_fit_an_unshared_device() -> None:
    result = only(checked_fit([asking("50Gi")], exclusive()))
    assert not result.allocatable
    assert "capacity" in str(result.reason)


def test_a_request_within_the_policy_fits_an_unshared_device() -> None:
    result = only(checked_fit([asking("25Gi")], exclusive()))
    assert result.allocatable
    assert result.devices[0].consumed == ()  # an unshared device records no consumedCapacity


def test_a_request_above_the_capacity_does_not_fit_without_a_policy() -> None:
    assert not only(checked_fit([asking("96Gi")], exclusive(policy=None))).allocatable
    assert only(checked_fit([asking("64Gi")], exclusive(policy=None))).allocatable


def test_a_request_for_a_capacity_the_device_lacks_skips_an_unshared_device() -> None:
    assert not only(checked_fit([asking("1", name="cores")], exclusive())).allocatable


def test_no_request_consumes_the_whole_capacity_which_the_policy_may_refuse() -> None:
    # fillEmptyRequest: the default, else the whole 80Gi, above max 40Gi: refused
    assert not only(checked_fit([asking(None)], exclusive())).allocatable
    assert only(checked_fit([asking(None)], exclusive(default="10Gi"))).allocatable


def test_with_the_gate_off_the_policy_of_an_unshared_device_is_not_read() -> None:
    gates = {**Target.parse("1.36").default_feature_gates, "DRAConsumableCapacity": False}
    assert only(checked_fit([asking(None)], exclusive(), gates=gates)).allocatable


def test_the_validator_rejects_an_unshared_device_given_a_request_its_policy_refuses() -> None:
    inventory = exclusive()
    result = DeviceResult("c", "gpu", "gpu.nvidia.com", "n", "gpu-0")
    problems = validate_allocation([asking("50Gi")], inventory, inventory.nodes[0], [result],
                                   classes=default_device_classes(), target=Target.parse("1.36"))
    assert any("not allowed by the device" in p for p in problems), problems
    assert validate_allocation([asking("30Gi")], inventory, inventory.nodes[0], [result],
                               classes=default_device_classes(), target=Target.parse("1.36")) == []
