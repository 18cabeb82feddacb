"""Review of the walk (``fit/likeness.py``): hostile items, files and claim sets, each read with
templates and without (every item through the checked parse); what is read must be the same, or
the same error, and a fleet's answers the per-node ones."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import dra_constructs._json_stream as stream
import dra_constructs.fit.likeness as likeness
import dra_constructs.fit.shapes as shapes
from dra_constructs.cli import main
from dra_constructs.fit.likeness import Template

from .test_fleet import node_slices
from .test_fleet_stream import kubectl_json
from .test_likeness import fleet_text, in_item, outcome


def at_item(data: bytes, node: str = "c") -> int:
    """Where the item holding ``node``'s first GPU slice opens (``c``: a narrow walk reads it)."""
    return data.rindex(b"\n        {", 0, data.index(f'"name": "{node}-gpu.nvidia.com-gpu-0"'.encode())) + 9


def replace_once(old: bytes, new: bytes) -> Callable[[bytes], bytes]:
    def change(item: bytes) -> bytes:
        assert old in item, old
        return item.replace(old, new, 1)
    return change


#: change of one like item -> what it tries
ATTACKS: dict[str, Callable[[bytes], bytes]] = {
    # a key put inside a variable string's place: the quote ends the string, the next fixed segment fails
    "a duplicate key in metadata through the name": replace_once(b'"name": "c-gpu.nvidia.com-gpu-0"',
                                                                 b'"name": "c-gpu.nvidia.com-gpu-0", "name": "x"'),
    "a duplicate nodeName through the node name": replace_once(b'"nodeName": "c"', b'"nodeName": "c", "nodeName": "d"'),
    "a key in the pool name's place": replace_once(b'"name": "c",', b'"name": "c", "generation": 9,'),
    "a quote where the template has a number": replace_once(b'"generation": 1', b'"generation": "1"'),
    "a number where the template has a string": replace_once(b'"nodeName": "c"', b'"nodeName": 7'),
    "null for the node name": replace_once(b'"nodeName": "c"', b'"nodeName": null'),
    "the close early (an item that ends in metadata)": replace_once(b'"metadata": {', b'"metadata": {}\n        }'),
    "a CRLF in the item": replace_once(b',\n', b',\r\n'),
    "another indent inside the item": replace_once(b'\n                "name": "c-',
                                                   b'\n               "name": "c-'),
    "a BOM inside the node name (a character like any other)": replace_once(b'"nodeName": "c"',
                                                                            b'"nodeName": "\xef\xbb\xbfc"'),
    "DEL in a uuid (not a control character in JSON)": replace_once(b'"string": "GPU-', b'"string": "\x7fGPU-'),
    "a surrogate in UTF-8 (CESU) in the node name": replace_once(b'"nodeName": "c"', b'"nodeName": "\xed\xa0\x80c"'),
    "an overlong encoding in the node name": replace_once(b'"nodeName": "c"', b'"nodeName": "\xc0\xafc"'),
    "a NUL in the name": replace_once(b'"name": "c-gpu', b'"name": "\x00c-gpu'),
    "a unicode escape in the node name": replace_once(b'"nodeName": "c"', b'"nodeName": "\\u0063"'),
    "an item longer by a member": replace_once(b'"spec": {', b'"spec": {\n                "x": 1,'),
    "trailing text after the item's close": lambda item: item + b"\n        } ",
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attacked_item_reads_as_the_checked_parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     attack: str) -> None:
    data = fleet_text()
    path = tmp_path / "slices.json"
    path.write_bytes(in_item(ATTACKS[attack])(data, at_item(data)))
    fast = outcome([path], monkeypatch)[0]
    whole = outcome([path], monkeypatch, templates=False)[0]
    assert fast == whole


@pytest.mark.parametrize("file_change", ["CRLF", "BOM", "trailing data", "a second list", "compact last item"])
def test_an_attacked_file_reads_as_the_loader_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       file_change: str) -> None:
    data = fleet_text()
    if file_change == "CRLF":
        data = data.replace(b"\n", b"\r\n")
    elif file_change == "BOM":
        data = b"\xef\xbb\xbf" + data
    elif file_change == "trailing data":
        data += b'{"x": 1}\n'
    elif file_change == "a second list":
        data = data.rstrip() + b"\n" + data
    else:  # the last item on one line: the walk of its template cannot run past the file's end
        last = data.rindex(b"\n        {") + 9
        end = data.rindex(b"\n        }") + 10
        data = data[:last] + json.dumps(json.loads(data[last:end])).encode() + data[end:]
    path = tmp_path / "slices.json"
    path.write_bytes(data)
    assert outcome([path], monkeypatch)[0] == outcome([path], monkeypatch, templates=False)[0]


def test_a_walk_never_reads_past_the_bytes_read() -> None:
    """The bytes from ``limit`` on are stale: an item whose rest lies there only is not walked."""
    text = fleet_text()
    at = at_item(text, "n1")
    end = text.index(b"\n        }", at) + 10
    item = text[at:end]
    template = Template(item, lambda path: path[0] == "metadata" or path in (("spec", "nodeName"),
                                                                              ("spec", "pool", "name")))
    assert template.match(bytearray(item), 0, len(item)) is not None
    for limit in (len(item) - 1, len(item) // 2, item.index(b'"nodeName": "') + 14, 1):
        assert template.match(bytearray(item), 0, limit) is None, limit


@pytest.mark.parametrize("reader", ["a claim", "a DeviceClass after the slices"])
def test_a_uuid_read_by_a_selector_is_answered_as_reading_the_file_whole(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], reader: str) -> None:
    """The blanking follows the claims (manifests only) and the DeviceClasses known before the
    slices; a selector that reads a value the walk took as variable - in the claim, or in a class
    found after the slices - gives the answers of the file read whole: one node has that GPU."""
    objects = node_slices("a") + node_slices("b") + node_slices("c")
    uuid = next(d["attributes"]["uuid"]["string"] for d in objects[1]["spec"]["devices"]
                if "uuid" in d.get("attributes", {}))
    selector = [{"cel": {"expression": f"device.attributes['gpu.nvidia.com'].uuid == '{uuid}'"}}]
    body: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com", "selectors": selector}
    if reader != "a claim":
        body = {"deviceClassName": "picky"}
        objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "picky"},
                        "spec": {"selectors": selector}})
    manifests = tmp_path / "claims.yaml"
    manifests.write_text(json.dumps({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                     "metadata": {"name": "that-gpu", "namespace": "default"},
                                     "spec": {"devices": {"requests": [{"name": "gpu", "exactly": body}]}}}))
    outputs = []
    for suffix in (".json", ".yaml"):  # kubectl's layout (walked) and one line of JSON (read whole)
        slices = tmp_path / f"slices{suffix}"
        slices.write_text(kubectl_json(objects) if suffix == ".json" else json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": objects}))
        code = main(["fit", "--quiet", "--format", "json", "--kubernetes-version", "1.36", "--slices", str(slices),
                     str(manifests)])
        outputs.append((code, json.loads(capsys.readouterr().out)))
    assert outputs[0] == outputs[1]
    assert outputs[0][0] == 0
    assert {name: node["allocatable"] for name, node in outputs[0][1]["nodes"].items()} == {
        "a": True, "b": False, "c": False}


def hostile_fleet(templates: int, attacks: int, labels: int) -> bytes:
    """Slices with many metadata labels (variable strings) that differ only at their end: each is
    unlike every template, and a wide walk reads all labels before it fails."""
    def one(index: int, device: str, layout: int) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"labels": {f"l{j}": "v" for j in range(labels)}, "name": f"s{index}"},
                "spec": {"driver": "gpu.example.com", "nodeName": f"n{index}",
                         "pool": {"generation": layout, "name": f"p{index}", "resourceSliceCount": 1},
                         "devices": [{"name": device, "attributes": {"a": {"string": "x"}}}]}}
    items = [one(i, f"d{i}", i // 16) for i in range(templates)]  # 16 a layout: no more templates of it
    items += [one(templates + i, "other", 0) for i in range(attacks)]
    return kubectl_json(items).encode()


def test_failed_walks_cost_at_most_a_share_of_the_bytes_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every item unlike every template, each walk failing late: the variable strings that failed
    walks pass stay proportional to the file (they once grew with items x templates: 36x the
    parse's CPU time on 8 MB); what is read is unchanged."""
    path = tmp_path / "slices.json"
    data = hostile_fleet(32, 32, 1000)
    path.write_bytes(data)
    wasted = [0]
    original = likeness._Cut.walk

    def counting(self: Any, text: Any, start: int, limit: int) -> Any:
        found = original(self, text, start, limit)
        if not isinstance(found, tuple):
            wasted[0] += len(self.segments[1])  # (at most what it passed; here, where walks fail at the end, about it)
        return found

    monkeypatch.setattr(likeness._Cut, "walk", counting)
    fast, parsed = outcome([path], monkeypatch)
    assert (fast, parsed) == outcome([path], monkeypatch, templates=False)  # every item parsed, as read whole
    widest = 1000 + 8
    assert wasted[0] <= 2 * (len(data) // 32 + (1 << 16)) + 4 * widest  # (shapes._BYTES_PER_STRING, _WALK_ALLOWANCE)


def test_a_fleet_still_walks_its_like_items_within_the_allowance(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The allowance is never reached by a fleet whose nodes repeat (every like item walked)."""
    monkeypatch.setattr(shapes, "_WALK_ALLOWANCE", 0, raising=False)  # only what the bytes read earn
    path = tmp_path / "slices.json"
    path.write_bytes(fleet_text(("a", "b", "c", "d", "e", "f")))
    fast, parsed = outcome([path], monkeypatch)
    whole, items = outcome([path], monkeypatch, templates=False)
    assert fast == whole and parsed == items // 6


def test_small_blocks_do_not_change_what_the_walk_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Items spanning refills of the buffer at every offset of a small window."""
    path = tmp_path / "slices.json"
    path.write_bytes(fleet_text(("a", "b")))
    whole = outcome([path], monkeypatch, templates=False)[0]
    item = len(fleet_text(("a",))) // len(node_slices("a"))
    for block, lookahead in ((item // 3, item // 2), (item, item + 7), (3 * item + 1, item * 2 - 5)):
        monkeypatch.setattr(stream, "BLOCK_BYTES", block)
        monkeypatch.setattr(stream, "LOOKAHEAD", lookahead)
        assert outcome([path], monkeypatch)[0] == whole, (block, lookahead)


def test_templates_learnt_hold_at_most_a_share_of_the_bytes_read(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Items of a string per few bytes, each of its own layout: each would be learnt (Python work
    per string, ~8x the parse's per byte); the strings learnt stay proportional to the file."""
    monkeypatch.setattr(shapes, "_LEARN_ALLOWANCE", 0, raising=False)  # only what the bytes read earn
    path = tmp_path / "slices.json"
    items = [json.loads(hostile_fleet(1, 0, 4000))["items"][0] for _ in range(24)]
    for index, item in enumerate(items):  # a layout each (a pool generation of its own), names of its own
        item["spec"]["pool"]["generation"] = index
        item["spec"]["nodeName"] = item["spec"]["pool"]["name"] = item["metadata"]["name"] = f"n{index}"
    data = kubectl_json(items).encode()
    path.write_bytes(data)
    learnt = [0]
    original = likeness.Template.__init__

    def counting(self: Any, text: bytes, changeable: Any) -> None:
        learnt[0] += text.count(b'"') // 2
        original(self, text, changeable)

    monkeypatch.setattr(likeness.Template, "__init__", counting)
    fast, parsed = outcome([path], monkeypatch)
    assert (fast, parsed) == outcome([path], monkeypatch, templates=False)
    assert learnt[0] <= len(data) // 64 + 2 * 4000 + 20  # (shapes._BYTES_PER_LEARNT_STRING; one item)
