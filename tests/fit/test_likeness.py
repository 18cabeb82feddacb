"""A slice like a template is walked over the file's bytes (``fit/likeness.py``): what it reads is
what the checked parse reads, and anything unusual in the item is parsed (or refused) as before."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import dra_constructs._json_stream as stream
import dra_constructs.fit.shapes as shapes
from dra_constructs._io import ReadBudget
from dra_constructs.errors import DraConstructsError
from dra_constructs.fit import default_device_classes
from dra_constructs.fit.fleet import read_attributes
from dra_constructs.fit.likeness import MAX_VARIABLE
from dra_constructs.fit.shapes import FleetReader

from .test_fleet import CASES, TARGET, node_slices
from .test_fleet_stream import kubectl_json

NODES = ("n1", "node-two", "c")  # names of different lengths: like items are not of the template's length
UUID = b'"string": "GPU-'


def fleet_text(names: tuple[str, ...] = NODES) -> bytes:
    return kubectl_json([s for name in names for s in node_slices(name)]).encode()


def outcome(paths: list[Path], monkeypatch: pytest.MonkeyPatch, templates: bool = True) -> tuple[Any, int]:
    """What the reader keeps of each slice (or the error it reports), and how many items it parsed."""
    monkeypatch.setattr(shapes, "_MAX_TEMPLATES", 256 if templates else 0)
    parsed: list[int] = []
    original = stream.parse_item

    def counting(data: bytes, file: str, line: int) -> Any:
        parsed.append(line)
        return original(data, file, line)

    monkeypatch.setattr(shapes, "parse_item", counting)
    claims = CASES["fits"]
    reader = FleetReader(read_attributes(claims, default_device_classes(), TARGET), TARGET)
    try:
        for path in paths:
            reader.read_path(str(path), ReadBudget.of(None))
    except DraConstructsError as error:
        return ("error", str(error)), len(parsed)
    return [(s.pool, s.node, s.name, s.digest, s.source) for s in reader.slices], len(parsed)


def in_item(change: Callable[[bytes], bytes]) -> Callable[[bytes, int], bytes]:
    """``change`` applied to the text of the item that opens at ``at`` (up to the next item)."""
    def apply(data: bytes, at: int) -> bytes:
        end = data.index(b"\n        }", at)
        return data[:at] + change(data[at:end]) + data[end:]
    return apply


def uuid_to(value: bytes) -> Callable[[bytes], bytes]:
    def change(item: bytes) -> bytes:
        start = item.index(UUID) + len(UUID) - 4
        return item[:start] + value + item[item.index(b'"', start):]
    return change


def cut_character(item: bytes) -> bytes:  # a valid UTF-8 character, its bytes in two strings
    item = item.replace(b'-gpu.nvidia.com-gpu-0"', b'-gpu.nvidia.com-gpu-0\xc3"', 1)
    at = item.index(b'"nodeName": "') + len(b'"nodeName": "')
    return item[:at] + b"\xa9" + item[at:]


#: change -> whether the item is still read from its text (else parsed, or refused as the parse refuses it)
CHANGES: dict[str, tuple[Callable[[bytes], bytes], bool]] = {
    "none": (lambda item: item, True),
    "a fixed segment differs (a space)": (lambda item: item.replace(b'"driver": ', b'"driver":  ', 1), False),
    "a fixed segment differs (a read value)": (lambda item: item.replace(b'"1g.10gb"', b'"1g.20gb"', 1), False),
    "a fixed segment differs (a number)": (lambda item: item.replace(b'"generation": 1', b'"generation": 2', 1),
                                           False),
    "an escape in a uuid": (uuid_to(b"\\u0047PU-x"), False),
    "an escaped quote in a uuid": (uuid_to(b'GPU-\\"x'), False),
    "an escaped quote in a name": (lambda item: item.replace(b'-gpu.nvidia.com-gpu-0"', b'-gpu.nvidia.com-gpu-0\\""',
                                                             1), False),
    "a uuid as long as read": (uuid_to(b"G" * MAX_VARIABLE), True),
    "a uuid one byte longer": (uuid_to(b"G" * (MAX_VARIABLE + 1)), False),
    "a uuid not ASCII": (uuid_to("GPU-\u00e9\u4e2d".encode()), True),
    "an empty uuid": (uuid_to(b""), True),
    "a tab in a uuid": (uuid_to(b"GPU-\tx"), False),
    "a newline in a uuid": (uuid_to(b"GPU-\nx"), False),
    "a bad byte in a uuid": (uuid_to(b"GPU-\xff"), False),
    "a character cut in two strings": (cut_character, False),
}


def empty_node_name(item: bytes) -> bytes:
    at = item.index(b'"nodeName": "') + len(b'"nodeName": "')
    return item[:at] + item[item.index(b'"', at):]


CHANGES["an empty node name"] = (empty_node_name, False)


@pytest.mark.parametrize("node", ["node-two", "c"])  # the wide walk (the first like node), the narrow one
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_changed_item_is_read_as_the_checked_parse_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              change: str, node: str) -> None:
    data = fleet_text()
    path = tmp_path / "slices.json"
    path.write_bytes(data)
    _, baseline = outcome([path], monkeypatch)
    at = data.rindex(b"\n        {", 0, data.index(f'"name": "{node}-gpu.nvidia.com-gpu-0"'.encode())) + 9
    edit, still_like = CHANGES[change]
    path.write_bytes(in_item(edit)(data, at))
    fast, parsed = outcome([path], monkeypatch)
    whole, _ = outcome([path], monkeypatch, templates=False)
    assert fast == whole  # the same slices, names, hashes and spans; or the same error
    if fast[0] != "error":
        assert parsed == baseline + (0 if still_like else 1)


def test_like_items_are_few_parses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "slices.json"
    path.write_bytes(fleet_text(("a", "b", "c", "d")))
    fast, parsed = outcome([path], monkeypatch)
    whole, items = outcome([path], monkeypatch, templates=False)
    assert fast == whole and parsed == items // 4  # one node's slices parsed, three nodes' read


def test_files_of_other_indents_and_small_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_bytes(fleet_text(("a", "b")))
    objects = [s for name in ("c", "d") for s in node_slices(name)]
    second.write_text(json.dumps({"apiVersion": "v1", "items": objects, "kind": "List",
                                  "metadata": {"resourceVersion": ""}}, indent=2))  # items one level less deep
    fast, parsed = outcome([first, second], monkeypatch)
    whole, items = outcome([first, second], monkeypatch, templates=False)
    assert fast == whole and parsed == items // 2  # a template is used only with its own close
    monkeypatch.setattr(stream, "BLOCK_BYTES", 1000)  # items longer than a block and than the lookahead:
    monkeypatch.setattr(stream, "LOOKAHEAD", 300)  # a walk that runs past the bytes read fails, the item is parsed
    assert outcome([first, second], monkeypatch)[0] == fast
    monkeypatch.setattr(stream, "LOOKAHEAD", 200_000)  # (more than an item)
    assert outcome([first, second], monkeypatch) == (fast, parsed)
