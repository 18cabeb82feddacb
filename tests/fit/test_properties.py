"""Property: on small inventories the allocator agrees with a brute-force search, and is valid."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_constructs.fit import Allocator, Claim, DeviceClass, Inventory, validate_allocation
from dra_constructs.fit.allocator import _attribute
from dra_constructs.fit.model import FitDevice
from dra_constructs.target import Target

from .helpers import claim, request

TARGET = Target.parse("1.36")
CLASSES = {"any.example.com": DeviceClass("any.example.com", ())}
MODEL = "device.attributes['gpu.nvidia.com'].model == '{}'"


@st.composite
def inventories(draw: Any) -> Inventory:
    sets = draw(st.integers(1, 2))
    counter_sets = [{"name": f"cs-{i}", "counters": {"slots": {"value": str(draw(st.integers(1, 4)))},
                                                     "mem-0": {"value": "1"}, "mem-1": {"value": "1"}}}
                    for i in range(sets)]
    devices = []
    for index in range(draw(st.integers(1, 6))):
        device: dict[str, Any] = {"name": f"d{index}", "attributes": {
            "model": {"string": draw(st.sampled_from("ab"))},
            "parent": {"string": draw(st.sampled_from(["p0", "p1"]))}}}
        if draw(st.booleans()):
            counters = {"slots": {"value": str(draw(st.integers(1, 3)))}}
            for mem in draw(st.lists(st.sampled_from(["mem-0", "mem-1"]), unique=True, max_size=2)):
                counters[mem] = {"value": "1"}
            device["consumesCounters"] = [{"counterSet": f"cs-{draw(st.integers(0, sets - 1))}",
                                           "counters": counters}]
        if draw(st.integers(0, 5)) == 0:
            device["taints"] = [{"key": "bad", "effect": "NoSchedule"}]
        devices.append(device)
    spec = {"driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n", "generation": 1,
                                                                    "resourceSliceCount": 1},
            "sharedCounters": counter_sets, "devices": devices}
    return Inventory.from_slices([{"kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": spec}])


def _request(draw: Any, name: str) -> dict[str, Any]:
    model = draw(st.sampled_from([None, "a", "b"]))
    extra: dict[str, Any] = {}
    if draw(st.integers(0, 3)) == 0:
        extra["tolerations"] = [{"key": "bad", "operator": "Exists"}]
    if draw(st.integers(0, 4)) == 0:
        return {"name": name, "firstAvailable": [
            {"name": "x", "deviceClassName": "any.example.com", "count": 2,
             "selectors": [{"cel": {"expression": MODEL.format("a")}}]},
            {"name": "y", "deviceClassName": "any.example.com", "count": 1, **extra}]}
    return request(name, "any.example.com", [MODEL.format(model)] if model else [], draw(st.integers(1, 2)), **extra)


@st.composite
def claim_sets(draw: Any) -> list[Claim]:
    claims = []
    for c in range(draw(st.integers(1, 3))):
        requests = [_request(draw, f"r{i}") for i in range(draw(st.integers(1, 2)))]
        constraints = [{"matchAttribute": "gpu.nvidia.com/parent"}] if draw(st.integers(0, 3)) == 0 else []
        claims.append(claim(f"c{c}", *requests, constraints=constraints))
    return claims


def _matches(device: FitDevice, selectors: Sequence[str]) -> bool:
    model = device.device.attributes["model"]["string"]
    return all(s == MODEL.format(model) for s in selectors)


def brute_force(claims: Sequence[Claim], inventory: Inventory) -> bool:
    """Try every alternative and every set of devices per request: does any assignment hold?"""
    devices = inventory.devices
    limits = inventory.pools[0].counter_sets
    options = []
    for c in claims:
        for r in c.requests:
            choices = []
            for alt in r.alternatives:
                usable = [d for d in devices if _matches(d, alt.selectors) and all(
                    any(t.tolerates(taint) for t in alt.tolerations) for taint in d.taints)]
                choices += [(c, r, combo) for combo in itertools.combinations(usable, alt.count)]
            options.append(choices)
    for assignment in itertools.product(*options):
        picked = [d for _, _, combo in assignment for d in combo]
        if len({d.id for d in picked}) != len(picked):
            continue
        used: dict[tuple[str, str], Fraction] = {}
        for d in picked:
            for counter_set, counters in d.consumes:
                for name, value in counters:
                    used[(counter_set, name)] = used.get((counter_set, name), Fraction(0)) + value
        if any(v > limits[s][n] for (s, n), v in used.items()):
            continue
        ok = True
        for c in claims:
            for constraint in c.constraints:
                values = {_attribute(d, constraint.attribute) for cl, _, combo in assignment if cl is c for d in combo}
                ok = ok and len(values) <= 1
        if ok:
            return True
    return False


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inventories(), claim_sets())
def test_allocator_agrees_with_brute_force(inventory: Inventory, claims: list[Claim]) -> None:
    allocator = Allocator(inventory, CLASSES, TARGET.default_feature_gates, TARGET, upstream_quirks=False)
    node = inventory.nodes[0]
    result = allocator.allocate(claims, node)
    assert result.allocatable == brute_force(claims, inventory), result.reason
    if result.allocatable:
        assert validate_allocation(claims, inventory, node, result.devices, classes=CLASSES, target=TARGET) == []
