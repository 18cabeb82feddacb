"""Property: the packing check (``fit/packing.py``) never changes the allocator's answer.

Random small nodes with what the allocator accepts around counters: several counter sets, devices
consuming from two sets or none, taints, shared (``allowMultipleAllocations``) devices, devices
already allocated (which can overdraw a counter); claims with constraints, ``firstAvailable``,
admin access, ``All``, counts past the devices. Checked from the first step (``packing_after=0``)
against the plain search (``packing_after=None``), on every minor the allocator's rules differ at.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_constructs.fit import AllocatedState, Claim, DeviceClass, Inventory
from dra_constructs.fit.allocator import Allocator
from dra_constructs.target import Target

from .helpers import claim

CLASSES = {"any.example.com": DeviceClass("any.example.com", ())}
MODEL = "device.attributes['gpu.nvidia.com'].model == '{}'"
VERSIONS = ["1.34", "1.35", "1.36", "1.37"]


@st.composite
def nodes(draw: Any) -> tuple[dict[bool, Inventory], list[str]]:
    """A one-node inventory in both layouts (by ``counter_sets_in_own_slice``: counter sets in a
    slice of their own, 1.35+, or beside the devices, 1.34), and the devices already allocated."""
    sets = draw(st.integers(1, 3))
    counter_sets = [{"name": f"cs-{i}", "counters": {
        "slots": {"value": str(draw(st.integers(1, 5)))}, "mem": {"value": draw(st.sampled_from(["1", "2", "1500m"]))}}}
        for i in range(sets)]
    devices = []
    for index in range(draw(st.integers(1, 7))):
        device: dict[str, Any] = {"name": f"d{index}", "attributes": {
            "model": {"string": draw(st.sampled_from("ab"))},
            "parent": {"string": draw(st.sampled_from(["p0", "p1"]))}}}
        consumes = []
        for counter_set in draw(st.lists(st.integers(0, sets - 1), unique=True, max_size=2)):
            counters = {}
            if draw(st.integers(0, 3)):
                counters["slots"] = {"value": str(draw(st.integers(0, 3)))}
            if draw(st.booleans()):
                counters["mem"] = {"value": draw(st.sampled_from(["1", "500m", "250m"]))}
            consumes.append({"counterSet": f"cs-{counter_set}", "counters": counters})
        if consumes:
            device["consumesCounters"] = consumes
        if draw(st.integers(0, 4)) == 0:
            device["taints"] = [{"key": "bad", "effect": "NoSchedule"}]
        if draw(st.integers(0, 5)) == 0:
            device["allowMultipleAllocations"] = True
            device["capacity"] = {"mem": {"value": "8"}}
        devices.append(device)
    pool = {"name": "n", "generation": 1, "resourceSliceCount": 2}
    split = Inventory.from_slices([
        {"kind": "ResourceSlice", "metadata": {"name": "counters"}, "spec": {
            "driver": "gpu.nvidia.com", "nodeName": "n", "pool": pool, "sharedCounters": counter_sets}},
        {"kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": {
            "driver": "gpu.nvidia.com", "nodeName": "n", "pool": pool, "devices": devices}}])
    combined = Inventory.from_slices([{"kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": {
        "driver": "gpu.nvidia.com", "nodeName": "n", "pool": {**pool, "resourceSliceCount": 1},
        "sharedCounters": counter_sets, "devices": devices}}])
    names = [d["name"] for d in devices]
    return {True: split, False: combined}, draw(st.lists(st.sampled_from(names), unique=True, max_size=2))


def _exactly(draw: Any) -> dict[str, Any]:
    model = draw(st.sampled_from([None, "a", "b"]))
    body: dict[str, Any] = {"deviceClassName": "any.example.com"}
    if model:
        body["selectors"] = [{"cel": {"expression": MODEL.format(model)}}]
    roll = draw(st.integers(0, 9))
    if roll == 0:
        body["allocationMode"] = "All"
    else:
        body["count"] = draw(st.integers(1, 4))
    if roll == 1:
        body["adminAccess"] = True
    if draw(st.integers(0, 3)) == 0:
        body["tolerations"] = [{"key": "bad", "operator": "Exists"}]
    return body


@st.composite
def pods(draw: Any) -> list[Claim]:
    claims = []
    for c in range(draw(st.integers(1, 3))):
        requests: list[dict[str, Any]] = []
        for r in range(draw(st.integers(1, 2))):
            if draw(st.integers(0, 3)) == 0:
                requests.append({"name": f"r{r}", "firstAvailable": [
                    {"name": f"s{s}", **{k: v for k, v in _exactly(draw).items() if k != "adminAccess"}}
                    for s in range(draw(st.integers(1, 3)))]})
            else:
                requests.append({"name": f"r{r}", "exactly": _exactly(draw)})
        constraints = [{"matchAttribute": "gpu.nvidia.com/parent"}] if draw(st.integers(0, 2)) == 0 else []
        claims.append(claim(f"c{c}", *requests, constraints=constraints))
    return claims


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes(), pods(), st.sampled_from(VERSIONS), st.booleans())
def test_the_packing_check_never_changes_the_answer(node: tuple[dict[bool, Inventory], list[str]],
                                                    claims: list[Claim], version: str, taints: bool) -> None:
    layouts, taken = node
    target = Target.parse(version)
    inventory = layouts[target.counter_sets_in_own_slice]
    gates = {**target.default_feature_gates, "DRAPartitionableDevices": True, "DRAPrioritizedList": True,
             "DRAAdminAccess": True, "DRADeviceTaints": taints}
    allocated = AllocatedState({d.id for d in inventory.devices if d.device.name in taken})
    plain, pruned = (Allocator(inventory, CLASSES, gates, target, allocated=allocated, packing_after=after)
                     .allocate(claims, inventory.nodes[0]) for after in (None, 0))
    assert (pruned.allocatable, pruned.devices) == (plain.allocatable, plain.devices), (plain.reason, pruned.reason)
    if not plain.allocatable:
        assert (pruned.reason or "").startswith("claim") == (plain.reason or "").startswith("claim"), (
            plain.reason, pruned.reason)
    assert pruned.steps <= plain.steps
    assert "invalid" not in (plain.reason or "")  # the layout the target reads
