"""A fleet's equivalent nodes are solved once (``fit/fleet.py``); every answer is the per-node one."""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_constructs.catalog import catalog_resource_slices
from dra_constructs.fit import AllocatedState, Allocator, Claim, Inventory, Node, Toleration, fit
from dra_constructs.fit.allocator import NodeResult
from dra_constructs.fit.model import SubRequest
from dra_constructs.target import Target

from .helpers import PROFILE, claim, mig, request

TARGET = Target.parse("1.36")
TAINT = {"key": "example.com/broken", "value": "ecc", "effect": "NoSchedule"}


def node_slices(name: str, gpus: int = 2, selector: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The catalog's DynamicMIG A100 node as ``name``: its own pool and slice names and GPU UUIDs."""
    text = json.dumps(catalog_resource_slices(["A100_80GB"], gpus_per_node=gpus, mig_mode="dynamic",
                                              split_counter_sets=True))
    text = text.replace("catalog-a100-80gb", name)
    text = re.sub(r"GPU-[0-9a-f-]{36}", lambda m: f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, name + m.group())}", text)
    slices: list[dict[str, Any]] = json.loads(text)
    if selector is not None:
        for slice_ in slices:
            spec = slice_["spec"]
            if spec.get("nodeName"):
                del spec["nodeName"]
                spec["nodeSelector"] = selector
    return slices


def device(slices: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(d for s in slices for d in s["spec"].get("devices", []) if d["name"] == name)
    return found


def mixed_fleet() -> tuple[Inventory, AllocatedState]:
    """Identical nodes, and nodes that differ by one allocated device, one taint, one attribute the
    selectors read, one the selectors do not read, and a node label a slice's nodeSelector reads."""
    slices: list[dict[str, Any]] = []
    for index in range(5):
        slices += node_slices(f"same-{index}")
    slices += node_slices("allocated")
    tainted = node_slices("tainted")
    device(tainted, "gpu-0-mig-1g10gb-19-0").setdefault("taints", []).append(dict(TAINT))
    slices += tainted
    attribute = node_slices("attribute")
    device(attribute, "gpu-0-mig-1g10gb-19-0")["attributes"]["profile"] = {"string": "1g.20gb"}
    slices += attribute
    unread = node_slices("unread")
    device(unread, "gpu-1")["attributes"]["serial"] = {"string": "1"}  # an extra attribute: not equivalent
    slices += unread
    blue = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "fleet", "operator": "In", "values": ["blue"]}]}]}
    slices += node_slices("labelled-blue", selector=blue)
    rack = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r7"]}]}]}
    slices += node_slices("labelled-green", selector=rack)  # its node is in rack r8: no devices
    nodes = [Node("labelled-blue", {"fleet": "blue"}), Node("labelled-green", {"fleet": "green", "rack": "r8"})]
    allocated = AllocatedState({"gpu.nvidia.com/allocated/gpu-0-mig-1g10gb-19-0"})
    return Inventory.from_slices(slices, nodes), allocated


CASES: dict[str, list[Claim]] = {
    "fits": [mig("a", "1g.10gb"), mig("b", "3g.40gb"), mig("c", "1g.10gb", count=2)],
    "does not fit": [mig(f"m{i}", "1g.10gb") for i in range(15)],
    "exact": [mig(f"m{i}", "1g.10gb") for i in range(14)],
    "tolerates": [claim("t", request("mig", selectors=[PROFILE.format("1g.10gb")], count=14,
                                     tolerations=[{"key": TAINT["key"], "operator": "Exists"}]))],
    "matchAttribute": [claim("pair", request("a", selectors=[PROFILE.format("1g.10gb")]),
                             request("b", selectors=[PROFILE.format("3g.40gb")]),
                             constraints=[{"matchAttribute": "gpu.nvidia.com/parentUUID"}])],
    "no match": [mig("x", "7g.80gb", count=3)],
    "run-time error": [claim("e", request("mig", selectors=["device.attributes['gpu.nvidia.com'].nothing == 'x'"]))],
    "whole GPU": [claim("g", request("gpu", device_class="gpu.nvidia.com", count=2))],
}


def both(claims: Sequence[Claim], inventory: Inventory, **options: Any) -> tuple[Any, Any]:
    fast = fit(claims, inventory, target=TARGET, **options)
    slow = fit(claims, inventory, target=TARGET, dedupe=False, **options)
    return fast, slow


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("count", [False, True])
def test_mixed_fleet_answers_are_the_per_node_ones(case: str, count: bool) -> None:
    inventory, allocated = mixed_fleet()
    fast, slow = both(CASES[case], inventory, allocated=allocated, count=count)
    assert list(fast.nodes) == list(slow.nodes)
    for name in slow.nodes:
        assert fast.nodes[name] == slow.nodes[name], name
    assert fast.counts == slow.counts
    assert fast.as_json() == slow.as_json()


def test_the_differing_nodes_differ_and_the_identical_ones_are_solved_once(monkeypatch: pytest.MonkeyPatch) -> None:
    inventory, allocated = mixed_fleet()
    solved: list[str] = []
    original = Allocator.allocate

    def counting(self: Allocator, claims: Sequence[Claim], node: Node) -> NodeResult:
        solved.append(node.name)
        return original(self, claims, node)

    monkeypatch.setattr(Allocator, "allocate", counting)
    claims = CASES["exact"]  # 14 x 1g.10gb: exactly what two GPUs hold
    report = fit(claims, inventory, target=TARGET, allocated=allocated)
    # Node objects come first: same-0..4 are carried from labelled-blue; the others differ from it
    assert solved == ["labelled-blue", "labelled-green", "allocated", "tainted", "attribute", "unread"], solved
    assert {n for n, r in report.nodes.items() if r.allocatable} == {
        "same-0", "same-1", "same-2", "same-3", "same-4", "unread", "labelled-blue"}
    assert {d.pool for d in report.nodes["same-3"].devices} == {"same-3"}
    assert {d.pool for d in report.nodes["labelled-blue"].devices} == {"labelled-blue"}


def test_a_reason_that_names_the_solved_node_is_not_carried() -> None:
    slices = node_slices("n-0", gpus=1) + node_slices("n-1", gpus=1)
    inventory = Inventory.from_slices(slices)
    claims = CASES["run-time error"]
    fast, slow = both(claims, inventory)
    assert fast.nodes == slow.nodes
    assert "gpu.nvidia.com/n-1/" in (fast.nodes["n-1"].reason or "")


def test_an_unread_attribute_value_does_not_split_the_fleet_but_a_bad_one_does() -> None:
    slices = node_slices("n-0", gpus=1) + node_slices("n-1", gpus=1) + node_slices("n-2", gpus=1)
    device(slices[-1:], "gpu-0")["attributes"]["driverVersion"] = {"version": "not-a-version"}
    inventory = Inventory.from_slices(slices)
    claims = [claim("g", request("gpu", device_class="gpu.nvidia.com"))]
    allocator = Allocator(inventory, fit_classes(), TARGET.default_feature_gates, TARGET)
    from dra_constructs.fit.fleet import FleetKeys

    keys = FleetKeys(allocator, claims)
    first, second, third = (keys.key(node) for node in inventory.nodes)
    assert first is not None and second is not None and third is not None
    assert first[0] == second[0]  # their GPU UUIDs differ; no selector reads them
    assert first[0] != third[0]
    fast, slow = both(claims, inventory)
    assert fast.nodes == slow.nodes
    assert not fast.nodes["n-2"].allocatable and fast.nodes["n-1"].allocatable


def fit_classes() -> Any:
    from dra_constructs.fit import default_device_classes

    return default_device_classes()


# --- property: generated fleets -------------------------------------------------------------

BASE = node_slices("base", gpus=1)
CLAIM_SHAPES: list[list[Claim]] = [
    [mig("a", "1g.10gb", count=7)],
    [mig("a", "1g.10gb"), mig("b", "3g.40gb"), mig("c", "2g.20gb")],
    [mig("a", "4g.40gb"), mig("b", "3g.40gb")],
    [claim("g", request("gpu", device_class="gpu.nvidia.com"))],
    [claim("t", request("mig", selectors=[PROFILE.format("1g.10gb")], count=7,
                        tolerations=[{"key": TAINT["key"], "operator": "Exists"}]))],
    [claim("p", request("a", selectors=[PROFILE.format("1g.10gb")]),
           request("b", selectors=[PROFILE.format("2g.20gb")]),
           constraints=[{"matchAttribute": "gpu.nvidia.com/parentUUID"}])],
]
DEVICE_NAMES = [d["name"] for s in BASE for d in s["spec"].get("devices", [])]


@st.composite
def fleets(draw: Any) -> tuple[Inventory, AllocatedState, list[Claim], bool]:
    slices: list[dict[str, Any]] = []
    nodes: list[Node] = []
    allocated = AllocatedState()
    for index in range(draw(st.integers(1, 7))):
        name = f"n{index}"
        kind = draw(st.sampled_from(["same", "same", "same", "allocated", "taint", "attribute", "uuid", "label",
                                     "generation"]))
        own = json.loads(json.dumps(BASE).replace("base", name))
        target = draw(st.sampled_from(DEVICE_NAMES))
        if kind == "allocated":
            allocated.devices.add(f"gpu.nvidia.com/{name}/{target}")
        elif kind == "taint":
            device(own, target).setdefault("taints", []).append(dict(TAINT))
        elif kind == "attribute":
            device(own, target)["attributes"]["profile"] = {"string": draw(st.sampled_from(["1g.10gb", "2g.20gb"]))}
        elif kind == "uuid":
            for slice_ in own:
                for each in slice_["spec"].get("devices", []):
                    for key in ("uuid", "parentUUID"):
                        if key in each["attributes"]:
                            each["attributes"][key] = {"string": f"GPU-{name}"}
        elif kind == "label":
            selector = {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [draw(st.sampled_from([name, "elsewhere"]))]}]}]}
            for slice_ in own:
                slice_["spec"].pop("nodeName", None)
                slice_["spec"]["nodeSelector"] = selector
            nodes.append(Node(name, {"kubernetes.io/hostname": name}))
        elif kind == "generation":
            stale = copy.deepcopy(own[-1])
            own[-1]["spec"]["pool"]["generation"] = 2
            for slice_ in own:
                slice_["spec"]["pool"]["generation"] = 2
            stale["metadata"]["name"] += "-old"
            slices.append(stale)
        slices += own
    claims = draw(st.sampled_from(CLAIM_SHAPES))
    return Inventory.from_slices(slices, nodes), allocated, claims, draw(st.booleans())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_generated_fleets_answer_as_the_per_node_solve(
        fleet: tuple[Inventory, AllocatedState, list[Claim], bool]) -> None:
    inventory, allocated, claims, count = fleet
    fast, slow = both(claims, inventory, allocated=allocated, count=count)
    assert fast.nodes == slow.nodes
    assert fast.counts == slow.counts


def test_toleration_spelling_is_part_of_the_claims_not_the_key() -> None:
    """Sanity: the tolerations the tests use are parsed (else the taint cases prove nothing)."""
    sub = CASES["tolerates"][0].requests[0].alternatives[0]
    assert isinstance(sub, SubRequest) and sub.tolerations == (Toleration(TAINT["key"], "Exists"),)


def shared_pool_slices() -> list[dict[str, Any]]:
    """One pool ``shared``: a slice for every node, one for rack r2, one with a device per node."""
    def one(name: str, spec: dict[str, Any], devices: list[dict[str, Any]]) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
                "spec": {"driver": "example.com", "pool": {"name": "shared", "generation": 1, "resourceSliceCount": 3},
                         **spec, "devices": devices}}

    rack = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r2"]}]}]}
    return [one("everyone", {"allNodes": True}, [{"name": "a0"}]),
            one("rack-r2", {"nodeSelector": rack}, [{"name": "b0"}]),
            one("per-device", {"perDeviceNodeSelection": True},
                [{"name": "c0", "nodeName": "n3"}, {"name": "c1", "nodeName": "n4"}])]


def test_which_slices_and_devices_of_a_shared_pool_reach_a_node_is_part_of_the_key() -> None:
    from dra_constructs.fit import DeviceClass

    nodes = [Node("n1", {"rack": "r1"}), Node("n2", {"rack": "r2"}), Node("n3", {"rack": "r1"}),
             Node("n4", {"rack": "r1"}), Node("n5", {"rack": "r2"})]
    inventory = Inventory.from_slices(shared_pool_slices(), nodes)
    classes = {"any.example.com": DeviceClass("any.example.com", ())}
    claims = [claim("two", request("d", device_class="any.example.com", count=2))]
    fast = fit(claims, inventory, target=TARGET, classes=classes)
    slow = fit(claims, inventory, target=TARGET, classes=classes, dedupe=False)
    assert fast.nodes == slow.nodes
    assert {n for n, r in fast.nodes.items() if r.allocatable} == {"n2", "n3", "n4", "n5"}
    assert [d.device for d in fast.nodes["n4"].devices] == ["a0", "c1"]


def test_a_commands_pods_share_the_node_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    from dra_constructs.fit import FleetCache
    from dra_constructs.fit.fleet import FleetKeys

    inventory, allocated = mixed_fleet()
    computed: list[str] = []
    original = FleetKeys._key

    def counting(self: FleetKeys, node: Node) -> Any:
        computed.append(node.name)
        return original(self, node)

    monkeypatch.setattr(FleetKeys, "_key", counting)
    fleet = FleetCache()
    for case in ("fits", "does not fit", "tolerates", "matchAttribute"):
        shared = fit(CASES[case], inventory, target=TARGET, allocated=allocated, fleet=fleet, count=True)
        alone = fit(CASES[case], inventory, target=TARGET, allocated=allocated, dedupe=False, count=True)
        assert shared.nodes == alone.nodes and shared.counts == alone.counts, case
    nodes = len(inventory.nodes)
    # the profile-reading Pods share one set of keys; matchAttribute also compares parentUUID: its own
    assert len(computed) == 2 * nodes
