"""A fleet read slice by slice, one node of each shape parsed (``fit/shapes.py``): the per-node answers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from dra_constructs._io import ReadBudget
from dra_constructs.cli import main
from dra_constructs.errors import DraConstructsError
from dra_constructs.fit import AllocatedState, Claim, FitReport, Inventory, collect, default_device_classes, fit
from dra_constructs.fit.fleet import read_attributes
from dra_constructs.fit.shapes import FleetReader, FleetShapes, fit_fleet

from .helpers import claim, request
from .test_fleet import CASES, TAINT, TARGET, device, node_slices


def kubectl_json(objects: Sequence[dict[str, Any]]) -> str:
    """What ``kubectl get resourceslices -o json`` prints: a ``List``, 4-space indent."""
    return json.dumps({"apiVersion": "v1", "items": list(objects), "kind": "List",
                       "metadata": {"resourceVersion": ""}}, indent=4) + "\n"


def fleet_objects() -> tuple[list[dict[str, Any]], AllocatedState]:
    """Identical nodes, and nodes differing by one allocated device, one device taint, one
    DeviceTaintRule on their pool, one read attribute, one extra unread attribute, one pool generation."""
    objects: list[dict[str, Any]] = []
    for index in range(4):
        objects += node_slices(f"same-{index}")
    objects += node_slices("allocated")
    objects += node_slices("allocated-twin")  # the same device allocated: one shape with "allocated"
    tainted = node_slices("tainted")
    device(tainted, "gpu-0-mig-1g10gb-19-0").setdefault("taints", []).append(dict(TAINT))
    objects += tainted
    objects += node_slices("rule")
    objects.append({"apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule", "metadata": {"name": "r"},
                    "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "rule",
                                                "device": "gpu-1-mig-1g10gb-19-0"}, "taint": dict(TAINT)}})
    attribute = node_slices("attribute")
    device(attribute, "gpu-0-mig-1g10gb-19-0")["attributes"]["profile"] = {"string": "1g.20gb"}
    objects += attribute
    unread = node_slices("unread")
    device(unread, "gpu-1")["attributes"]["serial"] = {"string": "1"}
    objects += unread
    newer = node_slices("newer")
    for slice_ in newer:
        slice_["spec"]["pool"]["generation"] = 2
    objects += newer
    objects += node_slices("same-4")
    allocated = AllocatedState({"gpu.nvidia.com/allocated/gpu-0-mig-1g10gb-19-0",
                                "gpu.nvidia.com/allocated-twin/gpu-0-mig-1g10gb-19-0"})
    return objects, allocated


def streamed(path: Path, claims: Sequence[Claim], allocated: AllocatedState) -> tuple[FleetShapes, Any, Inventory]:
    classes = default_device_classes()
    reader = FleetReader(read_attributes(claims, classes, TARGET), TARGET)
    reader.read_path(str(path), ReadBudget.of(None))
    state = collect([], reader.others)
    shapes = reader.shapes(state.nodes, allocated, state.taint_rules, read_attributes(claims, classes, TARGET))
    return shapes, state, Inventory.from_slices(shapes.slices, shapes.nodes, state.taint_rules)


def per_node(objects: list[dict[str, Any]], claims: Sequence[Claim], allocated: AllocatedState,
             count: bool) -> FitReport:
    state = collect([], objects)
    inventory = Inventory.from_slices(state.slices, state.nodes, state.taint_rules)
    return fit(claims, inventory, target=TARGET, allocated=allocated, count=count, dedupe=False)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("count", [False, True])
def test_streamed_fleet_answers_are_the_per_node_ones(tmp_path: Path, case: str, count: bool) -> None:
    objects, allocated = fleet_objects()
    path = tmp_path / "slices.json"
    path.write_text(kubectl_json(objects))
    claims = CASES[case]
    shapes, state, inventory = streamed(path, claims, allocated)
    fast = fit_fleet(claims, inventory, shapes, target=TARGET, classes=default_device_classes(),
                     gates=TARGET.default_feature_gates, allocated=allocated, taint_rules=state.taint_rules,
                     count=count)
    slow = per_node(objects, claims, allocated, count)
    assert list(fast.nodes) == list(slow.nodes)
    for name in slow.nodes:
        assert fast.nodes[name] == slow.nodes[name], name
    assert fast.counts == slow.counts
    assert fast.as_json() == slow.as_json()


def test_only_one_node_of_each_shape_is_parsed(tmp_path: Path) -> None:
    objects, allocated = fleet_objects()
    path = tmp_path / "slices.json"
    path.write_text(kubectl_json(objects))
    shapes, _, inventory = streamed(path, CASES["exact"], allocated)
    assert [n.name for n in inventory.nodes] == ["same-0", "allocated", "tainted", "rule", "attribute", "unread",
                                                 "newer"]
    assert {name: alias.rep for name, alias in shapes.aliases.items()} == {
        "same-1": "same-0", "same-2": "same-0", "same-3": "same-0", "same-4": "same-0",
        "allocated-twin": "allocated"}
    assert all(isinstance(alias.sources[0], tuple) for alias in shapes.aliases.values())  # read item by item
    # a selector that reads the UUID: every node has a shape of its own
    uuid_claims = [claim("u", request("gpu", device_class="gpu.nvidia.com",
                                      selectors=["device.attributes['gpu.nvidia.com'].uuid != ''"]))]
    shapes, _, inventory = streamed(path, uuid_claims, allocated)
    assert not shapes.aliases and len(inventory.nodes) == 12


def test_a_shared_pool_or_a_node_selector_reads_every_slice(tmp_path: Path) -> None:
    blue = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "fleet", "operator": "In", "values": ["blue"]}]}]}
    objects = node_slices("a") + node_slices("b") + node_slices("labelled", selector=blue)
    objects.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "labelled", "labels": {"fleet": "blue"}}})
    path = tmp_path / "slices.json"
    path.write_text(kubectl_json(objects))
    claims = CASES["fits"]
    shapes, _, inventory = streamed(path, claims, AllocatedState())
    assert not shapes.aliases and len(inventory.nodes) == 3
    fast = fit_fleet(claims, inventory, shapes, target=TARGET, classes=default_device_classes(),
                     gates=TARGET.default_feature_gates, allocated=AllocatedState())
    assert fast.nodes == per_node(objects, claims, AllocatedState(), False).nodes


def test_a_device_class_in_the_slice_files_that_reads_more_stops_the_grouping(tmp_path: Path) -> None:
    objects = node_slices("a") + node_slices("b")
    uuid = "device.attributes['gpu.nvidia.com'].uuid != 'x'"
    objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "mig.nvidia.com"},
                    "spec": {"selectors": [{"cel": {"expression": uuid}}]}})
    path = tmp_path / "slices.json"
    path.write_text(kubectl_json(objects))
    claims = CASES["fits"]
    classes = default_device_classes()
    reader = FleetReader(read_attributes(claims, classes, TARGET), TARGET)  # the estimate: profile only
    reader.read_path(str(path), ReadBudget.of(None))
    state = collect([], reader.others)
    final = {**classes, **state.classes}
    shapes = reader.shapes(state.nodes, AllocatedState(), [], read_attributes(claims, final, TARGET))
    assert not shapes.aliases and len(shapes.slices) == len([o for o in objects if o["kind"] == "ResourceSlice"])


def write_cli_inputs(tmp_path: Path, objects: list[dict[str, Any]], suffix: str) -> tuple[Path, Path]:
    manifests = tmp_path / "claims.yaml"
    manifests.write_text(json.dumps({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                                     "metadata": {"name": "one"}, "spec": {"spec": {"devices": {"requests": [
                                         {"name": "mig", "exactly": {"deviceClassName": "mig.nvidia.com",
                                                                     "count": 14}}]}}}}))
    slices = tmp_path / f"slices{suffix}"
    slices.write_text(kubectl_json(objects) if suffix == ".json" else json.dumps({
        "apiVersion": "v1", "kind": "List", "items": objects}))
    return manifests, slices


def test_the_command_line_answers_alike_streamed_and_read_whole(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    objects, _ = fleet_objects()
    outputs = []
    for suffix in (".json", ".yaml"):  # kubectl's layout (streamed) and one line of JSON in a .yaml (whole)
        manifests, slices = write_cli_inputs(tmp_path, objects, suffix)
        code = main(["fit", "--quiet", "--format", "json", "--kubernetes-version", "1.36", "--count",
                     "--slices", str(slices), str(manifests)])
        outputs.append((code, json.loads(capsys.readouterr().out)))
    assert outputs[0] == outputs[1]
    assert outputs[0][0] == 0 and len(outputs[0][1]["nodes"]) == 12
    code = main(["fit", "--quiet", "--kubernetes-version", "1.36", "--node", "same-3", "--slices",
                 str(tmp_path / "slices.json"), str(tmp_path / "claims.yaml")])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("same-3: allocatable\n") and "gpu.nvidia.com/same-3/" in out


def read_slices(path: Path, claims: Sequence[Claim]) -> list[tuple[Any, ...]]:
    reader = FleetReader(read_attributes(claims, default_device_classes(), TARGET), TARGET)
    reader.read_path(str(path), ReadBudget.of(None))
    return [(s.pool, s.node, s.name, s.digest, s.source) for s in reader.slices]


def test_a_slice_like_one_parsed_before_is_read_from_its_text_alike(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import dra_constructs.fit.shapes as shapes

    objects, _ = fleet_objects()
    for slice_ in objects[3:6]:  # a uid and a resourceVersion of its own: metadata is left out
        slice_["metadata"].update(uid=f"uid-{slice_['metadata']['name']}", resourceVersion="17")
    path = tmp_path / "slices.json"
    path.write_text(kubectl_json(objects))
    parsed: list[int] = []
    original = shapes.parse_item  # type: ignore[attr-defined]

    def counting(data: bytes, file: str, line: int) -> Any:
        parsed.append(line)
        return original(data, file, line)

    monkeypatch.setattr(shapes, "parse_item", counting)
    claims = CASES["fits"]
    fast = read_slices(path, claims)
    items = len(objects)
    assert len(parsed) < items / 2  # most slices are like one before
    monkeypatch.setattr(shapes, "_MAX_TEMPLATES", 0)
    parsed.clear()
    assert read_slices(path, claims) == fast and len(parsed) == items


@pytest.mark.parametrize("change", ["tab in a uuid", "a read value", "a bad byte in a uuid"])
def test_an_item_unlike_its_template_is_parsed(tmp_path: Path, change: str) -> None:
    objects = node_slices("a") + node_slices("b")
    text = kubectl_json(objects)
    cut = text.index('"name": "b-gpu.nvidia.com-gpu-0"')  # the second node's first GPU slice
    head, tail = text[:cut], text[cut:]
    if change == "tab in a uuid":
        tail = tail.replace('"string": "GPU-', '"string": "\tGPU-', 1)
    elif change == "a read value":
        tail = tail.replace('"string": "1g.10gb"', '"string": "1g.20gb"', 1)
    path = tmp_path / "slices.json"
    data = (head + tail).encode()
    if change == "a bad byte in a uuid":
        at = data.index(b'"string": "GPU-', cut) + len(b'"string": "')
        data = data[:at] + b"\xff" + data[at + 1:]
    path.write_bytes(data)
    claims = CASES["fits"]
    if change == "a read value":  # its own hash: the node has a shape of its own
        same = tmp_path / "same.json"
        same.write_text(kubectl_json(objects))
        assert len({s[3] for s in read_slices(path, claims)}) == len({s[3] for s in read_slices(same, claims)}) + 1
        return
    reader = FleetReader(read_attributes(claims, default_device_classes(), TARGET), TARGET)
    with pytest.raises(DraConstructsError) as raised:  # parsed, the file is read whole: the loader's error
        reader.read_path(str(path), ReadBudget.of(None))
    expected = "control character" if change == "tab in a uuid" else "not UTF-8"
    assert expected in str(raised.value) or "malformed JSON" in str(raised.value), raised.value
