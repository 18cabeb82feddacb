"""``_json_stream``: a kubectl JSON ``List`` read item by item is the file read whole, or not streamed.

Every hostile variant either gives exactly the objects (and lines) the loader gives for the whole
file, or raises ``NotStreamable`` so that the loader reads it whole and reports as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_constructs import _safe_load
from dra_constructs._io import ReadBudget
from dra_constructs._json_stream import NotStreamable, list_items
from dra_constructs._safe_load import MAX_DEPTH
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails.loader import document_objects, load_paths


def config_map(name: str, **data: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"},
            "data": {"a": "x", **data}}


def kubectl(items: list[Any]) -> str:
    return json.dumps({"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}},
                      indent=4) + "\n"


def streamed(path: Path) -> list[tuple[Any, int | None]]:
    """As ``FleetReader`` reads: an error about an item before the file is known to be a List reads it whole."""
    try:
        return [found for item in list_items(str(path), ReadBudget.of(None))
                for found in document_objects(item.value, str(path), item.line)]
    except DraConstructsError:
        raise NotStreamable from None


def whole(path: Path) -> list[tuple[Any, int | None]] | str:
    try:
        return [(m.obj, m.line) for m in load_paths([str(path)], max_bytes=None)]
    except DraConstructsError as error:
        return str(error)


def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "list.json"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def test_kubectl_layout_is_streamed_with_the_loaders_objects_and_lines(tmp_path: Path) -> None:
    path = write(tmp_path, kubectl([config_map(f"c{i}", b="\\n }\n,{") for i in range(5)]))
    found = streamed(path)
    assert found == whole(path) and len(found) == 5 and found[1][1] == 16


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


TEXT = kubectl([config_map("one"), config_map("two")])
VARIANTS = {
    "compact": json.dumps(json.loads(TEXT)),
    "duplicate key in an item": TEXT.replace('"a": "x"', '"a": "x", "a": "y"', 1),
    "NaN in an item": TEXT.replace('"a": "x"', '"a": NaN', 1),
    "trailing garbage": TEXT + "]",
    "two items keys": TEXT.replace('"kind": "List"', '"kind": "List", "items": []'),
    "not a List": TEXT.replace('"kind": "List"', '"kind": "Thing"'),
    "decoy items in metadata": TEXT.replace('{\n    "apiVersion": "v1",',
                                            '{\n    "apiVersion": "v1",\n    "meta": {\n    "items": [\n'
                                            '        {\n        "x": 1\n        }\n    ]\n    },', 1),
    "an item that is no object": TEXT.replace('        },\n        {', '        },\n        1,\n        {', 1),
    "items separated by spaces": TEXT.replace('        },\n        {', '        } ,\n        {', 1),
    "too deep by the two levels above the item": kubectl([config_map("d", n=nested(MAX_DEPTH - 3))]),
    "byte order mark": "\ufeff" + TEXT,
    "unterminated": TEXT[: TEXT.rindex("}", 0, TEXT.rindex("]"))],
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_hostile_variants_are_the_whole_read_or_not_streamed(tmp_path: Path, variant: str) -> None:
    path = write(tmp_path, VARIANTS[variant])
    expected = whole(path)
    try:
        found = streamed(path)
    except NotStreamable:
        return  # the command reads the file whole: ``expected``, error or objects
    assert found == expected, variant


def test_depth_counts_from_the_files_root(tmp_path: Path) -> None:
    path = write(tmp_path, kubectl([config_map("d", n=nested(MAX_DEPTH - 4))]))  # exactly the limit
    assert streamed(path) == whole(path)
    path = write(tmp_path, VARIANTS["too deep by the two levels above the item"])
    assert "nested deeper than 200" in str(whole(path))
    with pytest.raises(NotStreamable):
        streamed(path)


def test_not_utf8_and_over_budget(tmp_path: Path) -> None:
    path = write(tmp_path, TEXT.encode().replace(b'"x"', b'"\xff"', 1))
    with pytest.raises(NotStreamable):
        streamed(path)
    assert "not UTF-8" in str(whole(path))
    path = write(tmp_path, TEXT)
    with pytest.raises(DraConstructsError, match="input too large"):
        list(list_items(str(path), ReadBudget.of(100)))
    fifo = tmp_path / "fifo.json"
    import os

    os.mkfifo(fifo)
    with pytest.raises(DraConstructsError, match="not a regular file"):
        list(list_items(str(fifo), ReadBudget.of(None)))


def test_items_larger_than_a_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dra_constructs._json_stream as stream

    monkeypatch.setattr(stream, "BLOCK_BYTES", 100)
    path = write(tmp_path, kubectl([config_map(f"c{i}", big="y" * 300) for i in range(7)]))
    assert streamed(path) == whole(path)


# --- the orjson fast path proves keys and depth from its indented output (``_safe_load._dumped_keys``) ---

KEYS = st.text(alphabet='ab"\\: ', max_size=4)
VALUES = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.text(alphabet='x"\\: {}[]', max_size=5),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
                      max_leaves=12)


def careful(text: str, max_depth: int) -> Any:
    """The checked stdlib path: duplicates and depth refused (``None``), else the value."""
    try:
        value = json.loads(text, object_pairs_hook=_safe_load._duplicate_keys)
    except _safe_load._DuplicateKey:
        return None
    return None if _safe_load._too_deep(value, max_depth) else value


#: Separators with JSON's whitespace before the colon too (the key bound deletes whitespace before counting).
SEPARATORS = [None, (",", ":"), (", ", " : "), (",\n", "\t\r\n:\n")]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(VALUES, st.sampled_from([None, 1, 4]), st.booleans(), st.booleans(), st.integers(1, 6),
       st.sampled_from(SEPARATORS))
def test_the_fast_path_accepts_only_what_the_checked_path_accepts(value: Any, indent: int | None, duplicate: bool,
                                                                   unicode_quotes: bool, max_depth: int,
                                                                   separators: tuple[str, str] | None) -> None:
    text = json.dumps({"k": value, "z": 1}, indent=indent, separators=separators)
    if duplicate:  # the last key again (what orjson would silently keep)
        text = text[: text.rindex("}")].rstrip() + ', "z"' + (separators[1] if separators else ": ") + "2}"
    if unicode_quotes:  # quotes in strings the text bound does not see; orjson's output writes them \"
        text = text.replace('\\"', "\\u0022")
    fast = _safe_load._fast_json(text, max_depth)
    if fast is not _safe_load._UNSET:
        assert careful(text, max_depth) == fast


@pytest.mark.parametrize("depth", [2, 3, 4])
def test_an_empty_container_one_level_too_deep_is_seen(depth: int) -> None:
    inner: Any
    for inner in ([], {}):
        value: Any = inner
        for _ in range(depth - 1):
            value = [value]
        fast = _safe_load._fast_json(json.dumps(value), 3)
        assert (fast is _safe_load._UNSET) == (depth > 3), (depth, inner)


def test_a_quote_the_text_escapes_as_unicode_does_not_hide_a_duplicate_key() -> None:
    text = '{"k": "a\\u0022: b", "z": 1, "z": 2}'  # orjson writes the quote \\" : one more "name": in its output
    assert _safe_load._fast_json(text) is _safe_load._UNSET
    with pytest.raises(DraConstructsError, match="duplicate key"):
        _safe_load.json_document(text, "f.json")


@pytest.mark.parametrize("number", ["-9223372036854775809", "18446744073709551616", "-92233720368547758090"])
def test_integers_orjson_reads_as_floats_stay_integers(number: str) -> None:
    """orjson gives a float below -2**63 (19 digits) and from 2**64; the checked path an int."""
    assert _safe_load.json_document(f'{{"n": {number}}}', "f.json") == {"n": int(number)}
