"""The faster YAML path of ``_safe_load`` gives exactly PyYAML's values and nodes (issue 25 item 1).

``yaml_documents`` composes with libyaml whose per-node Python callbacks are cut down
(``_safe_load._loader``: memoized implicit tags, no path tracking), constructs plain documents
with a string fast path and counts a big text's events in C first. Every value must equal
``yaml.load_all(text, Loader=CSafeLoader)`` with the same types (``True`` is not ``1``, NaN is
NaN), and every node PyYAML's composer gives (class, tag, value, style, start and end positions:
the lines findings name) - on the real-world corpus, on hand-picked YAML 1.1 corner cases and
on generated documents. Inputs the reference reads but ours refuses must be refused by one of
our limits (duplicate keys, depth, aliases), never by a parsing difference.
"""

from __future__ import annotations

import datetime
import gc
import math
import weakref
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shared_data import shared_path

from dra_constructs import _safe_load
from dra_constructs._safe_load import MAX_NODES_PER_DOCUMENT, count_nodes, yaml_documents
from dra_constructs.errors import DraConstructsError

_LoaderClass = type[yaml.SafeLoader] | type[yaml.CSafeLoader]
_REFERENCE: _LoaderClass = yaml.CSafeLoader


def _canonical(value: Any) -> Any:
    """``value`` with every type spelled out (``True`` != ``1`` != ``1.0``; NaN equals NaN; key order kept)."""
    if isinstance(value, dict):
        return ("dict", tuple((_canonical(k), _canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("list", tuple(_canonical(item) for item in value))
    if isinstance(value, tuple):
        return ("tuple", tuple(_canonical(item) for item in value))
    if isinstance(value, set):
        return ("set", tuple(sorted(repr(item) for item in value)))
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else repr(value))
    return (type(value).__name__, repr(value))


def _node_shape(root: yaml.Node | None) -> list[Any]:
    """Every node of ``root`` in order: class, tag, scalar value and style, positions; aliases by index."""
    seen: dict[int, int] = {}
    shape: list[Any] = []
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if node is None:
            shape.append(None)
            continue
        if id(node) in seen:
            shape.append(("alias", seen[id(node)]))
            continue
        seen[id(node)] = len(shape)
        marks = tuple((m.line, m.column, m.index) for m in (node.start_mark, node.end_mark))
        if isinstance(node, yaml.ScalarNode):
            shape.append(("scalar", node.tag, node.value, node.style, marks))
            continue
        shape.append((type(node).__name__, node.tag, len(node.value), node.flow_style, marks))
        children = [part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode) else node.value
        stack.extend(reversed(children))
    return shape


def _reference(text: str, reference: _LoaderClass = _REFERENCE) -> tuple[list[Any], list[Any]] | None:
    """PyYAML's values and nodes (composed, then constructed: merge keys flatten them) of ``text``, or ``None``."""
    loader = reference(text)
    values: list[Any] = []
    nodes: list[Any] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            values.append(loader.construct_document(node))  # = yaml.load_all; merge keys flatten the node
            nodes.append(node)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError):
        return None
    finally:
        loader.dispose()
    return values, nodes


def _justified(problem: str, nodes: list[yaml.Node]) -> bool:
    """Whether PyYAML's nodes really break the limit ``problem`` names (not a difference in reading)."""
    if "aliases expand" in problem:
        return True  # only aliases add nodes; the hostile tests pin the budget
    stack: list[tuple[Any, int, frozenset[int]]] = [(node, 1, frozenset()) for node in nodes]
    while stack:
        node, depth, above = stack.pop()
        if id(node) in above or depth > _safe_load.MAX_DEPTH:
            if "nested deeper" in problem:
                return True  # recursive, or deeper than the limit
            continue
        if isinstance(node, yaml.MappingNode):
            keys = [yaml.constructor.SafeConstructor().construct_object(k) for k, _ in node.value
                    if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge"]
            if "duplicate key" in problem and len(set(keys)) < len(keys):  # equal as Python keys: 1 and true too
                return True
            children = [part for pair in node.value for part in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        else:
            continue
        stack.extend((child, depth + 1, above | {id(node)}) for child in children)
    return False


def assert_same_as_pyyaml(text: str, loader: _LoaderClass = _REFERENCE) -> None:
    """``yaml_documents(text)`` equals PyYAML's reading of it, or refuses it as PyYAML does / by our limit."""
    reference = _reference(text, loader)
    try:
        documents = list(yaml_documents(text, "t.yaml"))
    except DraConstructsError as error:
        if reference is not None:
            assert _justified(error.problem, reference[1]), (error.problem, text[:300])
        return
    assert reference is not None, f"PyYAML refuses what we read: {text[:300]!r}"
    values, nodes = reference
    assert [_canonical(d.value) for d in documents] == [_canonical(v) for v in values]
    assert [_node_shape(d.node) for d in documents] == [_node_shape(n) for n in nodes]
    assert [d.line for d in documents] == [n.start_mark.line + 1 for n in nodes]


# YAML 1.1 as PyYAML's SafeLoader reads it: every implicit type, every tag SafeLoader constructs,
# anchors, merge keys, styles, multi-document streams; plus inputs it refuses.
CASES = {
    "ints": "a: 0777\nb: 0o17\nc: 0x1F\nd: 0b1010\ne: 1_000\nf: +12\ng: -0\nh: 190:20:30\ni: 12e3\nj: '12'\n",
    "floats": "a: 1.5\nb: .inf\nc: -.Inf\nd: .NaN\ne: 6.8523015e+5\nf: 1_0.5\ng: 190:20:30.15\nh: 1e3\ni: -.5\n",
    "bools-and-nulls": "a: yes\nb: No\nc: on\nd: OFF\ne: y\nf: n\ng: ~\nh: null\ni: Null\nj:\nk: 'yes'\nl: \"on\"\n",
    "timestamps": ("a: 2001-12-14t21:59:43.10-05:00\nb: 2002-12-14\nc: 2001-12-14 21:59:43.10 -5\n"
                   "d: 2001-12-15T02:59:43.1Z\ne: '2002-12-14'\n"),
    "explicit-tags": ("a: !!str 123\nb: !!int '7'\nc: !!float '1'\nd: !!bool yes\ne: !!null ''\n"
                      "f: !!binary aGVsbG8=\ng: !!timestamp 2002-12-14\nh: !!str\ni: !!map {x: 1}\nj: !!seq [1]\n"),
    "collections-tags": "s: !!set {a, b}\no: !!omap [{a: 1}, {b: 2}]\np: !!pairs [{a: 1}, {a: 2}]\n",
    "anchors": "base: &b {cpu: '1', memory: 1Gi}\nx: *b\nlist: &l [1, 2]\ny: [*l, *l]\ns: &s text\nz: *s\n",
    "merge-keys": ("base: &base {a: 1, b: 2}\nother: &o {c: 3}\none:\n  <<: *base\n  b: 9\n"
                   "many:\n  <<: [*base, *o]\n  d: 4\nquoted:\n  '<<': plain\n"),
    "multi-docs": "a: 1\n---\n- x\n- y\n---\nplain scalar\n...\n---\n---\n# only a comment\n",
    "explicit-end": "%YAML 1.1\n---\nk: v\n...\n%TAG !e! tag:example.com,2000:\n---\nk: w\n",
    "flow-and-block": ("a: {b: [1, {c: d}], e: 'f'}\ng:\n- - h\n  - i\n- j: |\n    literal\n    text\n"
                       "  k: >\n    folded\n    text\n"),
    "keys-of-other-types": "1: int key\ntrue: bool key\n~: null key\n2001-01-01: date key\n1.5: float\n",
    "unicode": "name: \"caf\\u00e9 \\U0001F600\"\nplain: ĂŞ ✓\nquoted: 'it''s'\n",
    "empty": "",
    "only-comments": "# nothing\n",
    "scalar-document": "just text\n",
    "kubernetes": ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {app: x}\n  annotations:\n"
                   "    a: 'true'\nspec:\n  containers:\n  - name: c\n    image: i:1.0\n    ports:\n"
                   "    - containerPort: 8080\n    resources:\n      limits: {nvidia.com/gpu: 1, cpu: 500m}\n"),
    "complex-key": "? [a, b]\n: v\n",
    "custom-tag": "a: !custom x\n",
    "duplicate-key": "a: 1\nb: 2\na: 3\n",
    "recursive-alias": "a: &a [*a]\n",
    "undefined-alias": "a: *nowhere\n",
    "bad-indent": "a:\n  b: 1\n c: 2\n",
    "bad-timestamp": "a: 2001-13-45\n",
    "bad-binary": "a: !!binary '@@@'\n",
}


@pytest.mark.parametrize("text", CASES.values(), ids=CASES.keys())
def test_corner_cases_read_as_pyyaml_reads_them(text: str) -> None:
    assert_same_as_pyyaml(text)


@pytest.mark.parametrize("text", CASES.values(), ids=CASES.keys())
def test_without_libyaml_too(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """PyYAML's pure-Python loader (an image without libyaml) takes the same callbacks: what it reads alone."""
    monkeypatch.setattr(_safe_load, "_Loader", yaml.SafeLoader)
    assert_same_as_pyyaml(text, yaml.SafeLoader)  # (its plain scalars have style None, libyaml's "")


def test_the_cases_cover_what_they_claim() -> None:
    """The corner cases are not vacuous: the reference reads these types from them."""
    ints = yaml.load(CASES["ints"], Loader=_REFERENCE)
    assert ints["a"] == 511 and ints["b"] == "0o17" and ints["h"] == 685230 and ints["i"] == "12e3"
    flags = yaml.load(CASES["bools-and-nulls"], Loader=_REFERENCE)
    assert flags["a"] is True and flags["e"] == "y" and flags["j"] is None and flags["k"] == "yes"
    assert isinstance(yaml.load(CASES["timestamps"], Loader=_REFERENCE)["a"], datetime.datetime)
    assert yaml.load(CASES["merge-keys"], Loader=_REFERENCE)["one"] == {"a": 1, "b": 9}
    assert [d.value for d in yaml_documents(CASES["multi-docs"], "t")][:3] == [{"a": 1}, ["x", "y"], "plain scalar"]


def test_the_real_world_corpus_reads_as_pyyaml_reads_it() -> None:
    corpus = shared_path("corpus/realworld", "the real-world corpus", override="DRA_CORPUS_DIR")
    files = sorted(p for p in corpus.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    assert len(files) >= 300
    read = 0
    for path in files:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
        assert_same_as_pyyaml(text)
        read += 1
    assert read == len(files)


_TRICKY = ["yes", "No", "on", "off", "y", "~", "null", "", "0777", "0o17", "0x1F", "1_000", "190:20:30", "1e3",
           "1.0e+3", ".inf", "-.INF", ".nan", "2002-12-14", "2001-12-14t21:59:43.10-05:00", "<<", "=", "-",
           "true", "True", "TRUE", "tRUE", "12", "-0", "+.5", "3.", "1:2:3.5", "0b101", "a: b", "#", "'", '"',
           "x y", "café", "\t", "1,000", "0x_1", "1__2", "_1", "0.", "-", "?", "! x"]
_SCALAR = st.one_of(st.sampled_from(_TRICKY), st.text(st.characters(codec="utf-8"),
                                                      max_size=12))


def _render(scalar: str, style: int) -> str:
    if style == 0:
        return scalar  # plain: may be anything, or invalid YAML (both must refuse it then)
    if style == 1:
        return "'" + scalar.replace("'", "''") + "'"
    return yaml.safe_dump(scalar, default_style='"', width=10_000).split("\n")[0]


@st.composite
def _documents(draw: st.DrawFn) -> str:
    """Block and flow mappings and lists of tricky scalars in every style, with anchors, aliases and merges."""
    lines: list[str] = []
    anchors: list[str] = []
    for i in range(draw(st.integers(1, 8))):
        kind = draw(st.integers(0, 5))
        key = _render(draw(_SCALAR), draw(st.integers(0, 2)))
        value = _render(draw(_SCALAR), draw(st.integers(0, 2)))
        if kind == 0:
            lines.append(f"{key}: {value}")
        elif kind == 1:
            lines.append(f"k{i}:\n  - {value}\n  - {_render(draw(_SCALAR), draw(st.integers(0, 2)))}")
        elif kind == 2:
            lines.append(f"k{i}: &a{i} {{x: {value}, y: [{value}]}}")
            anchors.append(f"a{i}")
        elif kind == 3 and anchors:
            lines.append(f"k{i}: *{draw(st.sampled_from(anchors))}")
        elif kind == 4 and anchors:
            lines.append(f"k{i}:\n  <<: *{draw(st.sampled_from(anchors))}\n  z: {value}")
        else:
            lines.append(f"k{i}: [{value}, {{{key}: {value}}}]")
    separator = draw(st.sampled_from(["\n", "\n---\n"]))
    return separator.join(lines) + "\n"


_SETTINGS = settings(max_examples=300, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(_documents())
def test_generated_documents_read_as_pyyaml_reads_them(text: str) -> None:
    assert_same_as_pyyaml(text)


def _nested(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4))


_DATA = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20), st.sampled_from(_TRICKY),
              st.dates(), st.datetimes(), st.binary(max_size=8)),
    _nested, max_leaves=25)


@_SETTINGS
@given(_DATA, st.sampled_from([None, True, False]), st.booleans())
def test_dumped_data_reads_as_pyyaml_reads_it(data: Any, flow: bool | None, explicit: bool) -> None:
    """Whatever PyYAML's safe dumper writes, in block, flow and mixed style, with ``---`` or without."""
    text = yaml.safe_dump_all([data, {"second": data}], default_flow_style=flow, explicit_start=explicit,
                              allow_unicode=True)
    assert_same_as_pyyaml(text)


def test_memoized_tags_keep_plain_and_quoted_apart() -> None:
    """One value plain and quoted in one load: the memo is keyed by the scalar's style flags too."""
    text = "".join(f"p{i}: {v}\nq{i}: '{v}'\n" for i, v in enumerate(["yes", "12", "~", "1.5", "2002-12-14"] * 3))
    (document,) = yaml_documents(text, "t")
    assert document.value["p0"] is True and document.value["q0"] == "yes" and document.value["p1"] == 12
    assert document.value["q3"] == "1.5" and isinstance(document.value["p4"], datetime.date)
    assert_same_as_pyyaml(text)


def test_the_loader_is_freed_without_the_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memoized ``resolve`` refers back to its loader: released after the load, not left to gc."""
    made: list[weakref.ref[Any]] = []

    class Recorded(_safe_load._Loader):  # type: ignore[misc, valid-type]
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            made.append(weakref.ref(self))

    monkeypatch.setattr(_safe_load, "_Loader", Recorded)
    enabled = gc.isenabled()
    gc.disable()
    try:
        assert [d.value for d in yaml_documents("a: yes\n---\nb: 1\n", "t")] == [{"a": True}, {"b": 1}]
        assert made and all(ref() is None for ref in made)
    finally:
        if enabled:
            gc.enable()


def test_node_limit_holds_with_a_syntax_error_after_the_big_document(tmp_path: Path) -> None:
    """The C pre-count gives up on a stream with an error anywhere; the document before it is still counted."""
    text = "x: [" + "1," * (MAX_NODES_PER_DOCUMENT + 10) + "1]\n---\n: : bad: [\n"
    with pytest.raises(DraConstructsError, match="more than 2,000,000 nodes"):
        count_nodes(text, "big.yaml")


def test_a_big_document_under_the_limit_is_passed(tmp_path: Path) -> None:
    """4,000,002+ characters (counted) but fewer nodes than the limit: read, not refused."""
    text = "x: [" + ", ".join(["1" * 4] * 900_000) + "]\n"
    assert len(text) > 2 * MAX_NODES_PER_DOCUMENT
    count_nodes(text, "big.yaml")
