"""The allocator against the rules of the scheduler's structured allocator."""

from __future__ import annotations

from typing import Any

import pytest

from dra_constructs.fit import AllocatedState, DeviceClass, Inventory, Node, default_device_classes
from dra_constructs.fit.model import quantity

from .helpers import PROFILE, checked_fit, claim, dynamic, mig, only, request


def test_two_3g40gb_leave_no_room_for_a_1g10gb_on_an_a100_80gb() -> None:
    inventory = dynamic("A100_80GB")
    matching = [d for d in inventory.devices if d.device.attributes.get("profile") == {"string": "1g.10gb"}]
    assert len(matching) == 7  # naive counting finds 7 matching devices
    result = only(checked_fit([mig("a", "3g.40gb"), mig("b", "3g.40gb"), mig("c", "1g.10gb")], inventory))
    assert not result.allocatable
    assert "claim c" in result.reason and "counter" in result.reason and "gpu-0-counter-set" in result.reason
    fits = only(checked_fit([mig("a", "3g.40gb"), mig("b", "3g.40gb")], inventory))
    assert {d.device for d in fits.devices} == {"gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4"}
    # one 3g.40gb leaves four memory slices: exactly four 1g.10gb fit beside it
    assert only(checked_fit([mig("a", "3g.40gb"), mig("c", "1g.10gb", count=4)], inventory)).allocatable
    assert not only(checked_fit([mig("a", "3g.40gb"), mig("c", "1g.10gb", count=5)], inventory)).allocatable


@pytest.mark.parametrize("model", ["A30", "A100_40GB", "A100_80GB", "H100_80GB", "H200_141GB", "B200_180GB"])
def test_each_profile_packs_to_its_catalog_maximum(model: str) -> None:
    from dra_constructs.catalog import gpu_spec

    inventory = dynamic(model)
    for profile in gpu_spec(model).mig_profiles:
        report = checked_fit([mig("p", profile.name)], inventory, count=True)
        assert report.counts == {inventory.nodes[0].name: profile.max_count}, profile.name


def test_the_full_gpu_takes_every_counter() -> None:
    inventory = dynamic("H100_80GB")
    whole = claim("whole", request("gpu", device_class="gpu.nvidia.com"))
    assert only(checked_fit([whole], inventory)).allocatable
    assert not only(checked_fit([whole, mig("m", "1g.10gb")], inventory)).allocatable
    assert only(checked_fit([whole, mig("m", "1g.10gb")], dynamic("H100_80GB", gpus=2))).allocatable


def test_devices_are_distinct_across_the_claims_of_the_pod() -> None:
    inventory = dynamic(gpus=2)
    result = only(checked_fit([mig("a", "7g.80gb"), mig("b", "7g.80gb")], inventory))
    assert result.allocatable and len({d.device for d in result.devices}) == 2
    assert not only(checked_fit([mig(f"c{i}", "7g.80gb") for i in range(3)], inventory)).allocatable


def test_allocated_devices_and_their_counters_are_taken() -> None:
    inventory = dynamic()
    allocated = AllocatedState({"gpu.nvidia.com/catalog-a100-80gb/gpu-0-mig-3g40gb-9-0"})
    result = only(checked_fit([mig("a", "3g.40gb")], inventory, allocated=allocated))
    assert result.allocatable and result.devices[0].device == "gpu-0-mig-3g40gb-9-4"
    assert not only(checked_fit([mig("a", "4g.40gb")], inventory, allocated=allocated)).allocatable


def test_match_attribute_keeps_the_requests_on_one_parent() -> None:
    inventory = dynamic(gpus=2)
    constraint = {"matchAttribute": "gpu.nvidia.com/parentUUID", "requests": ["big", "small"]}
    both = claim("pair", request("big", selectors=[PROFILE.format("4g.40gb")]),
                 request("small", selectors=[PROFILE.format("1g.10gb")], count=3), constraints=[constraint])
    result = only(checked_fit([both], inventory))
    assert result.allocatable
    too_many = claim("pair", request("big", selectors=[PROFILE.format("4g.40gb")]),
                     request("small", selectors=[PROFILE.format("1g.10gb")], count=4), constraints=[constraint])
    # 1g.10gb placements start at slices 0-6: three fit beside a 4g.40gb on slices 0-3
    assert not only(checked_fit([too_many], inventory)).allocatable
    unconstrained = claim("pair", request("big", selectors=[PROFILE.format("4g.40gb")]),
                          request("small", selectors=[PROFILE.format("1g.10gb")], count=4))
    assert only(checked_fit([unconstrained], inventory)).allocatable


def test_distinct_attribute_needs_consumable_capacity_and_spreads_devices() -> None:
    inventory = dynamic(gpus=2)
    spread = claim("spread", request("m", selectors=[PROFILE.format("1g.10gb")], count=2),
                   constraints=[{"distinctAttribute": "gpu.nvidia.com/parentUUID"}])
    result = only(checked_fit([spread], inventory))
    assert result.allocatable and len({d.device.split("-mig")[0] for d in result.devices}) == 2
    off = only(checked_fit([spread], inventory, gates={**_gates("1.36"), "DRAConsumableCapacity": False}))
    assert not off.allocatable and "DRAConsumableCapacity" in off.reason


def _gates(version: str) -> dict[str, bool]:
    from dra_constructs.target import Target

    return Target.parse(version).default_feature_gates


def test_first_available_takes_the_first_alternative_that_fits() -> None:
    inventory = dynamic()
    flex = claim("flex", {"name": "m", "firstAvailable": [
        {"name": "big", "deviceClassName": "mig.nvidia.com", "selectors": [{"cel": {"expression": PROFILE.format(
            "7g.80gb")}}]},
        {"name": "small", "deviceClassName": "mig.nvidia.com", "selectors": [{"cel": {"expression": PROFILE.format(
            "1g.10gb")}}]},
    ]})
    alone = only(checked_fit([flex], inventory))
    assert [d.request for d in alone.devices] == ["m/big"]
    beside = only(checked_fit([mig("first", "3g.40gb"), flex], inventory))
    assert [d.request for d in beside.devices if d.claim == "flex"] == ["m/small"]
    off = only(checked_fit([flex], inventory, "1.33"))  # DRAPrioritizedList alpha, off by default
    assert not off.allocatable and "DRAPrioritizedList" in off.reason


def test_allocation_mode_all_takes_every_matching_device_or_nothing() -> None:
    inventory = dynamic(gpus=2)
    every = claim("every", request("all", device_class="gpu.nvidia.com", allocationMode="All"))
    result = only(checked_fit([every], inventory))
    assert sorted(d.device for d in result.devices) == ["gpu-0", "gpu-1"]
    assert not only(checked_fit([mig("m", "1g.10gb"), every], inventory)).allocatable
    none = claim("none", request("all", selectors=[PROFILE.format("9g.1tb")], allocationMode="All"))
    assert not only(checked_fit([none], inventory)).allocatable


def test_admin_access_shares_devices_in_use() -> None:
    from dra_constructs.catalog import catalog_resource_slices

    static = Inventory.from_slices(catalog_resource_slices(["A100_80GB"], gpus_per_node=1)[:1])
    allocated = AllocatedState({"gpu.nvidia.com/catalog-a100-80gb/gpu-0"})
    admin = claim("admin", request("gpu", device_class="gpu.nvidia.com", adminAccess=True))
    assert only(checked_fit([admin], static, allocated=allocated)).allocatable
    plain = claim("plain", request("gpu", device_class="gpu.nvidia.com"))
    assert not only(checked_fit([plain], static, allocated=allocated)).allocatable
    assert not only(checked_fit([plain], static, allocated=allocated)).no_match
    # Counters still count for admin access (upstream checks them for every device): an
    # allocated full GPU in DynamicMIG leaves nothing, not even for an admin.
    dynamic_allocated = AllocatedState({"gpu.nvidia.com/catalog-a100-80gb/gpu-0"})
    assert not only(checked_fit([admin], dynamic(), allocated=dynamic_allocated)).allocatable
    off = only(checked_fit([admin], static, "1.33"))
    assert not off.allocatable and "admin access" in off.reason


def _tainted(effect: str) -> Inventory:
    from dra_constructs.catalog import catalog_resource_slices

    slices = catalog_resource_slices(["A100_80GB"], gpus_per_node=2)
    for device in slices[0]["spec"]["devices"]:
        if device["name"] == "gpu-0":
            device["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": effect}]
    return Inventory.from_slices(slices[:1])


def test_taints_need_tolerations() -> None:
    whole = claim("w", request("gpu", device_class="gpu.nvidia.com", count=2))
    assert not only(checked_fit([whole], _tainted("NoSchedule"))).allocatable
    tolerant = claim("w", request("gpu", device_class="gpu.nvidia.com", count=2, tolerations=[
        {"key": "gpu.nvidia.com/xid", "operator": "Exists", "effect": "NoSchedule"}]))
    assert only(checked_fit([tolerant], _tainted("NoSchedule"))).allocatable
    assert only(checked_fit([whole], _tainted("None"))).allocatable  # informational only
    assert only(checked_fit([whole], _tainted("NoSchedule"), "1.35")).allocatable  # DRADeviceTaints off in 1.35


def test_tainted_device_keeps_its_counters_through_1_35_only() -> None:
    from dra_constructs.catalog import catalog_resource_slices

    slices = catalog_resource_slices(["A100_80GB"], gpus_per_node=2, mig_mode="dynamic", split_counter_sets=True)
    for s in slices:
        for device in s["spec"].get("devices", []):
            if device["name"] == "gpu-0":
                device["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]
    inventory = Inventory.from_slices(slices)
    claims = [claim("w", request("gpu", device_class="gpu.nvidia.com")), mig("m", "1g.10gb")]
    gates = {"DRAPartitionableDevices": True, "DRADeviceTaints": True}
    # Through 1.35 the scheduler checks gpu-0's counters, refuses it for the taint and keeps its
    # counters consumed: the 1g.10gb then finds no room on gpu-0 (gpu-1 went to the whole-GPU claim).
    assert not only(checked_fit(claims, inventory, "1.35", gates=gates)).allocatable
    # From 1.36.3 / 1.37 allocateDevice rolls the counters back (rollbackDevice): the 1g.10gb fits on gpu-0.
    for version in ("1.36", "1.37"):
        result = only(checked_fit(claims, inventory, version))
        assert result.allocatable, version
        assert {d.device for d in result.devices} == {"gpu-1", "gpu-0-mig-1g10gb-19-0"}
    from dra_constructs.fit import Allocator
    from dra_constructs.target import Target

    target = Target.parse("1.35")
    plain = Allocator(inventory, default_device_classes(), {**target.default_feature_gates, **gates}, target,
                      upstream_quirks=False)
    assert plain.allocate(claims, inventory.nodes[0]).allocatable  # the plain rules allow it


def test_a_shared_device_charges_its_counters_once_from_1_35() -> None:
    device = {"name": "d0", "attributes": {"model": {"string": "a"}}, "allowMultipleAllocations": True,
              "capacity": {"mem": {"value": "8"}},
              "consumesCounters": [{"counterSet": "cs", "counters": {"slots": {"value": "1"}}}]}
    slices = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": {
        "driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
        "sharedCounters": [{"name": "cs", "counters": {"slots": {"value": "1"}}}], "devices": [device]}}]
    inventory = Inventory.from_slices(slices)
    classes = {"any": DeviceClass("any", ())}
    two = [claim(f"c{i}", request("r", "any", capacity={"requests": {"mem": "2"}})) for i in range(2)]
    gates = {"DRAPartitionableDevices": True, "DRAConsumableCapacity": True}
    # 1.34 (the experimental allocator) checks the counters again for the second share: no slot left.
    assert not only(checked_fit(two, inventory, "1.34", classes=classes, gates=gates)).allocatable
    # 1.35+ reads counter sets from a slice of their own (a combined slice offers no device).
    pool = {"name": "n", "generation": 1, "resourceSliceCount": 2}
    split = Inventory.from_slices([
        {**slices[0], "metadata": {"name": "s-counters"}, "spec": {
            "driver": "gpu.nvidia.com", "nodeName": "n", "pool": pool,
            "sharedCounters": slices[0]["spec"]["sharedCounters"]}},
        {**slices[0], "metadata": {"name": "s-devices"}, "spec": {
            "driver": "gpu.nvidia.com", "nodeName": "n", "pool": pool, "devices": [device]}}])
    for version in ("1.35", "1.37"):  # skipCounterCheck: a device in use already paid its counters
        assert only(checked_fit(two, split, version, classes=classes, gates=gates)).allocatable, version


def test_node_selection_per_slice_and_per_device() -> None:
    base = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice"}

    def device(name: str, **extra: Any) -> dict[str, Any]:
        return {"name": name, "attributes": {"type": {"string": "gpu"}}, **extra}

    slices = [
        {**base, "metadata": {"name": "local"}, "spec": {
            "driver": "gpu.nvidia.com", "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1}, "devices": [device("g0")]}},
        {**base, "metadata": {"name": "rack"}, "spec": {
            "driver": "gpu.nvidia.com", "pool": {"name": "rack", "generation": 1, "resourceSliceCount": 1},
            "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "rack", "operator": "In", "values": ["a"]}]}]},
            "devices": [device("r0")]}},
        {**base, "metadata": {"name": "fabric"}, "spec": {
            "driver": "gpu.nvidia.com", "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
            "perDeviceNodeSelection": True,
            "devices": [device("f1", nodeName="n1"), device("f2", nodeName="n2"), device("fall", allNodes=True)]}},
    ]
    nodes = [Node("n1", {"rack": "a"}), Node("n2", {"rack": "b"})]
    inventory = Inventory.from_slices(slices, nodes)
    three = claim("c", request("gpu", device_class="gpu.nvidia.com", count=4))
    report = checked_fit([three], inventory)
    assert report.nodes["n1"].allocatable
    assert sorted(d.device for d in report.nodes["n1"].devices) == ["f1", "fall", "g0", "r0"]
    assert not report.nodes["n2"].allocatable
    two = claim("c", request("gpu", device_class="gpu.nvidia.com", count=2))
    assert sorted(d.device for d in checked_fit([two], inventory).nodes["n2"].devices) == ["f2", "fall"]
    off = checked_fit([two], inventory, gates={**_gates("1.36"), "DRAPartitionableDevices": False})
    assert not off.nodes["n2"].allocatable  # perDeviceNodeSelection slices need the gate


def test_incomplete_pools_are_skipped_and_fail_all() -> None:
    from dra_constructs.catalog import catalog_resource_slices

    slices = catalog_resource_slices(["A100_80GB"], gpus_per_node=2, mig_mode="dynamic", split_counter_sets=True)
    inventory = Inventory.from_slices(slices[:-1])  # one GPU slice still missing
    assert not only(checked_fit([mig("m", "1g.10gb")], inventory)).allocatable
    every = claim("every", request("all", device_class="gpu.nvidia.com", allocationMode="All"))
    result = only(checked_fit([every], inventory))
    assert "being updated" in result.reason
    # Through 1.34 an ExactCount request takes devices of an incomplete pool (the 1.34 scheduler
    # binds such a Pod: tests/controlplane oracle, synthetic "incomplete" cases); All still fails.
    gates = {"DRAPartitionableDevices": True}
    assert only(checked_fit([mig("m", "1g.10gb")], inventory, "1.34", gates=gates)).allocatable
    assert "being updated" in only(checked_fit([every], inventory, "1.34", gates=gates)).reason


def test_a_cel_runtime_error_fails_the_node() -> None:
    bad = claim("bad", request("gpu", device_class="gpu.nvidia.com",
                               selectors=["device.attributes['gpu.nvidia.com'].cudaComputeCapability == '8.0.0'"]))
    result = only(checked_fit([bad], dynamic()))
    assert not result.allocatable and "CEL runtime error" in result.reason


def test_device_classes_come_from_the_inputs() -> None:
    classes = {**default_device_classes(), "a100.example.com": DeviceClass("a100.example.com", (
        "device.attributes['gpu.nvidia.com'].productName.contains('A100')",))}
    whole = claim("w", request("gpu", device_class="a100.example.com"))
    assert only(checked_fit([whole], dynamic(), classes=classes)).allocatable
    assert not only(checked_fit([whole], dynamic("H100_80GB"), classes=classes)).allocatable
    unknown = only(checked_fit([claim("w", request("gpu", device_class="nope"))], dynamic()))
    assert "could not retrieve device class nope" in unknown.reason


def test_claim_device_limit() -> None:
    huge = claim("h", request("m", selectors=[PROFILE.format("1g.10gb")], count=33))
    assert "exceeds the claim limit of 32" in only(checked_fit([huge], dynamic(gpus=8))).reason


def test_consumable_capacity_shares_one_device() -> None:
    slices = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": {
        "driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0", "allowMultipleAllocations": True, "attributes": {"type": {"string": "gpu"}},
                     "capacity": {"memory": {"value": "80Gi", "requestPolicy": {"default": "10Gi"}}}}]}}]
    inventory = Inventory.from_slices(slices)
    shares = [claim(f"c{i}", request("gpu", device_class="gpu.nvidia.com",
                                     capacity={"requests": {"memory": "40Gi"}})) for i in range(2)]
    assert only(checked_fit(shares, inventory)).allocatable
    assert not only(checked_fit([*shares, shares[0]], inventory)).allocatable
    defaults = [claim(f"d{i}", request("gpu", device_class="gpu.nvidia.com")) for i in range(9)]
    assert only(checked_fit(defaults[:8], inventory)).allocatable  # 8 x the policy default of 10Gi
    assert not only(checked_fit(defaults, inventory)).allocatable
    assert quantity("10Gi", "x", "y") * 8 == quantity("80Gi", "x", "y")
    off = only(checked_fit(shares, inventory, "1.35"))
    assert not off.allocatable


def test_distinct_attribute_refuses_repeats_from_1_35_only() -> None:
    """The 1.34 scheduler bound such Pods (tests/controlplane oracle: its allocator compares value pointers)."""
    devices = [{"name": f"d{i}", "attributes": {"model": {"string": "a"}}} for i in range(2)]
    slices = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": {
        "driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
        "devices": devices}}]
    inventory = Inventory.from_slices(slices)
    classes = {"any": DeviceClass("any", ())}
    two = [claim("c", request("r", "any", count=2), constraints=[{"distinctAttribute": "gpu.nvidia.com/model"}])]
    gates = {"DRAConsumableCapacity": True}
    assert only(checked_fit(two, inventory, "1.34", classes=classes, gates=gates)).allocatable
    assert not only(checked_fit(two, inventory, "1.37", classes=classes, gates=gates)).allocatable
    lacking = [claim("c", request("r", "any", count=2), constraints=[{"distinctAttribute": "gpu.nvidia.com/rack"}])]
    assert not only(checked_fit(lacking, inventory, "1.34", classes=classes, gates=gates)).allocatable
