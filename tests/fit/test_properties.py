"""Property: on small inventories the allocator agrees with a brute-force search, and is valid."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_constructs.fit import Allocator, Claim, DeviceClass, Inventory, validate_allocation
from dra_constructs.fit.constraints import _attribute
from dra_constructs.fit.model import FitDevice
from dra_constructs.target import Target

from .helpers import claim, request

TARGET = Target.parse("1.36")
CLASSES = {"any.example.com": DeviceClass("any.example.com", ())}
MODEL = "device.attributes['gpu.nvidia.com'].model == '{}'"
POLICIES: list[dict[str, Any] | None] = [
    None, {"default": "2"}, {"default": "2", "validValues": ["2", "4", "8"]},
    {"default": "2", "validRange": {"min": "2", "max": "6", "step": "2"}},
    {"default": "3", "validRange": {"min": "3"}}, {"default": "1", "validRange": {"min": "1", "step": "3"}}]


@st.composite
def inventories(draw: Any) -> tuple[Inventory, dict[str, dict[str, Any]]]:
    """A one-node inventory, and its devices as written (by name)."""
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
        if draw(st.integers(0, 2)) == 0:  # shared (KEP-5075): capacity "mem" under one of the POLICIES
            device["allowMultipleAllocations"] = True
            device["capacity"] = {"mem": {"value": str(draw(st.integers(4, 8)))}}
            policy = draw(st.sampled_from(POLICIES))
            if policy is not None:
                device["capacity"]["mem"]["requestPolicy"] = policy
        devices.append(device)
    # 1.35+ layout: the counter sets in a slice of their own (a slice holds devices or sharedCounters)
    pool = {"name": "n", "generation": 1, "resourceSliceCount": 2}
    slices = [{"kind": "ResourceSlice", "metadata": {"name": "counters"}, "spec": {
                  "driver": "gpu.nvidia.com", "nodeName": "n", "pool": pool, "sharedCounters": counter_sets}},
              {"kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": {
                  "driver": "gpu.nvidia.com", "nodeName": "n", "pool": pool, "devices": devices}}]
    inventory = Inventory.from_slices(slices)
    return inventory, {d["name"]: d for d in devices}


def _request(draw: Any, name: str) -> dict[str, Any]:
    model = draw(st.sampled_from([None, "a", "b"]))
    extra: dict[str, Any] = {}
    if draw(st.integers(0, 3)) == 0:
        extra["tolerations"] = [{"key": "bad", "operator": "Exists"}]
    if draw(st.booleans()):
        extra["capacity"] = {"requests": {"mem": str(draw(st.integers(1, 9)))}}
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


def share_of(raw_device: dict[str, Any], asked: Fraction | None) -> Fraction | None:
    """What one request takes of a shared device's ``mem``, ``None`` if its policy allows nothing.

    Written from the API's field docs, apart from the allocator: no request takes the default (or
    everything); otherwise the least amount >= the request among the values the policy allows.
    """
    raw = raw_device["capacity"]["mem"]
    total = Fraction(raw["value"])
    policy = raw.get("requestPolicy")
    if asked is None:
        return Fraction(policy["default"]) if policy else total
    if policy is None or ("validValues" not in policy and "validRange" not in policy):
        return asked
    if "validValues" in policy:
        allowed = sorted(Fraction(v) for v in policy["validValues"])
    else:
        span = policy["validRange"]
        low, high = Fraction(span["min"]), Fraction(span.get("max", 100))
        step = Fraction(span["step"]) if "step" in span else None
        if step is None:
            return max(asked, low) if max(asked, low) <= high else None
        allowed = [low + k * step for k in range(100) if low + k * step <= high]
    return next((v for v in allowed if v >= asked), None)


def brute_force(claims: Sequence[Claim], inventory: Inventory, raw: dict[str, dict[str, Any]]) -> bool:
    """Try every alternative and every set of devices per request: does any assignment hold?

    A shared device may serve several requests (a device once per request); its counters count
    once, and the requests' shares of its ``mem`` (see ``share_of``) must fit its value together.
    """
    devices = inventory.devices
    limits = inventory.pools[0].counter_sets
    options = []
    for c in claims:
        for r in c.requests:
            choices = []
            for alt in r.alternatives:
                # KEP-5075: with DRAConsumableCapacity on, a device lacking a capacity the request
                # asks for cannot serve it, shared or not
                usable = [d for d in devices if _matches(d, alt.selectors) and all(
                    any(t.tolerates(taint) for t in alt.tolerations) for taint in d.taints)
                    and set(dict(alt.capacity)) <= set(raw[d.device.name].get("capacity", {}))]
                choices += [(c, alt, combo) for combo in itertools.combinations(usable, alt.count)]
            options.append(choices)
    for assignment in itertools.product(*options):
        picked = [d for _, _, combo in assignment for d in combo]
        exclusive = [d.id for d in picked if not d.allow_multiple]
        if len(set(exclusive)) != len(exclusive):
            continue
        shares: dict[str, Fraction] = {}
        fits = True
        for _, alt, combo in assignment:
            for d in combo:
                if d.allow_multiple:
                    share = share_of(raw[d.device.name], dict(alt.capacity).get("mem"))
                    fits = fits and share is not None and set(dict(alt.capacity)) <= {"mem"}
                    shares[d.id] = shares.get(d.id, Fraction(0)) + (share or 0)
        if not fits or any(v > Fraction(raw[i.rpartition("/")[2]]["capacity"]["mem"]["value"])
                           for i, v in shares.items()):
            continue
        used: dict[tuple[str, str], Fraction] = {}
        for d in {d.id: d for d in picked}.values():
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
def test_allocator_agrees_with_brute_force(drawn: tuple[Inventory, dict[str, dict[str, Any]]],
                                           claims: list[Claim]) -> None:
    inventory, raw = drawn
    allocator = Allocator(inventory, CLASSES, TARGET.default_feature_gates, TARGET, upstream_quirks=False)
    node = inventory.nodes[0]
    result = allocator.allocate(claims, node)
    assert result.allocatable == brute_force(claims, inventory, raw), result.reason
    if result.allocatable:
        assert validate_allocation(claims, inventory, node, result.devices, classes=CLASSES, target=TARGET) == []
