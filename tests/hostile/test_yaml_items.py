"""A YAML ``*List`` read a batch of items at a time equals the whole document's parse (issue 25 item 1).

:func:`~dra_constructs._yaml_items.plain_list` either gives exactly the items (values with their
types, and the line of each item's node) that ``_safe_load.yaml_documents`` gives for the whole
document, or raises :class:`NotPlain` so that the caller reads the text whole. Every case here
is checked both ways: by hand-picked shapes (hostile ones included: an item line inside a quoted
string, aliases, an alias bomb, a ``%TAG`` that redefines ``!!``, depth at the limit, duplicate
keys, other line breaks) and by generated lists, with batches of one item and of many.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_constructs import _yaml_items
from dra_constructs._safe_load import MAX_DEPTH, yaml_documents
from dra_constructs._yaml_items import NotPlain, plain_list
from dra_constructs.errors import DraConstructsError

from .test_yaml_fast_loader import _canonical

_HEAD = "apiVersion: v1\nkind: List\nitems:\n"
_TAIL = "metadata:\n  resourceVersion: ''\n"


def _whole(text: str) -> list[tuple[Any, int]] | None:
    """``(value, line)`` of each item as the whole document's parse gives them; ``None`` if it refuses."""
    try:
        documents = list(yaml_documents(text, "f"))
    except DraConstructsError:
        return None
    documents = [d for d in documents if d.value is not None]
    assert len(documents) == 1
    node = documents[0].node
    items = next(v for k, v in node.value if k.value == "items")
    return [(_canonical(value), item.start_mark.line + 1)
            for value, item in zip(documents[0].value["items"], items.value, strict=True)]


def _streamed(text: str) -> list[tuple[Any, int]] | None:
    try:
        return [(_canonical(item.value), item.line) for item in plain_list(text, "f")]
    except NotPlain:
        return None


@pytest.fixture(params=[1, _yaml_items.BATCH_CHARS], ids=["one-item-batches", "default-batches"])
def batch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(_yaml_items, "BATCH_CHARS", request.param)
    return int(request.param)


def _same(text: str, *, streams: bool) -> None:
    """Streamed equals whole; ``streams``: the text must be streamed (else it must be left to the whole read)."""
    streamed = _streamed(text)
    if streams:
        assert streamed is not None
        assert streamed == _whole(text)
        assert streamed  # (compares something)
    else:
        assert streamed is None


_POD = """- apiVersion: v1
  kind: Pod
  metadata:
    name: p{n}
    labels: {{app: "x", tier: 'y'}}
  spec:
    containers:
    - name: c
      image: i
      args: [a, "b", 0777, 0o17, 190:20:30, yes, on, ~, .inf, .NaN, 1_000, 0x1f, 2024-01-02]
      command:
      - |
        line one
        - not an item
      - >-
        folded
        text
      resources: {{limits: {{nvidia.com/gpu: {n}}}}}
"""


def _pods(count: int, indent: int = 0) -> str:
    items = "".join(_POD.format(n=n) for n in range(count))
    if indent:
        items = "".join(" " * indent + line if line.strip() else line for line in items.splitlines(keepends=True))
    return _HEAD + items + _TAIL


@pytest.mark.usefixtures("batch")
@pytest.mark.parametrize("text", [
    _pods(5),
    _pods(5, indent=2),
    _pods(3) + "---\n",
    "# a comment\n---\n" + _pods(3),
    _HEAD + "# before the items\n\n" + _POD.format(n=1) + "# between\n\n" + _POD.format(n=2) + "\n# after\n" + _TAIL,
    "apiVersion: v1\nitems:\n" + _POD.format(n=1) + "kind: PodList\n",  # kind after the items
    _HEAD + "- {apiVersion: v1, kind: Pod, metadata: {name: a}}\n- apiVersion: v1\n  kind: Pod\n"
            "  metadata: {name: \"b\\u00e9\"}\n",  # flow items, escapes, no text after the items
    _HEAD + "- apiVersion: v1\n  kind: Pod\n  metadata: {name: a, annotations: {x: \"q&a\"}}\n",  # & in a string
    _HEAD + "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: a\n    <<: {namespace: m}\n",  # merge key
    _HEAD + "- apiVersion: v1\n  kind: Pod\n  metadata: {name: !!str 12, uid: !!binary aGk=}\n",  # tags
    _HEAD + "- apiVersion: v1\n  kind: Pod\n  metadata: {name: \"caf\u00e9 \u2603\"}\n",  # not ASCII
    _HEAD + "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: a\n    x: \"multi\n      line\"\n",
    # block scalars whose lines look like item lines or keys, kept trailing lines at a batch's end
    _HEAD + "- a: |2\n    - b: c\n    items:\n  d: |+\n    x\n\n\n- |1\n  - e\n\n# c\n- >-\n  f\n\n" + _TAIL,
    "apiVersion: v1\nkind: List\nitems:\n  - |+\n   - x\n\n  - b\n...\n",
    # a plain scalar continued on deeper lines, a flow sequence over lines, an explicit key in an item
    _HEAD + "- a: x\n   y\n\n- [a,\n  b]\n- ? a\n  : b\n" + _TAIL,
])
def test_streamed_items_equal_the_whole_parse(text: str) -> None:
    _same(text, streams=True)


@pytest.mark.usefixtures("batch")
@pytest.mark.parametrize("text", [
    # an item line inside a quoted string: the split is wrong, and found out
    _HEAD + "- apiVersion: v1\n  kind: Pod\n  metadata: {name: \"a\n- apiVersion: v1\n  x\"}\n",
    _HEAD + "- apiVersion: v1\n  kind: Pod\n  metadata: {name: 'a\n- b: c\n  d'}\n",
    # aliases: the alias limits count per document, read whole
    _HEAD + "- &a {apiVersion: v1, kind: Pod, metadata: {name: a}}\n- *a\n",
    _HEAD + "- apiVersion: v1\n  kind: Pod\n  metadata: &m {name: a}\n  spec: {x: *m}\n",
    _HEAD + "- apiVersion: v1\n  kind: Pod\n  metadata: {name: &n a, namespace: *n}\n",  # a scalar alias
    "meta: &m {name: a}\n" + _HEAD + "- {apiVersion: v1, kind: Pod, metadata: *m}\n",  # anchor outside the items
    # directives: %TAG could change what !! means in the items
    "%TAG !! tag:example.com,2000:\n---\n" + _HEAD + "- {apiVersion: v1, kind: Pod, metadata: {name: !!str a}}\n",
    "%YAML 1.1\n---\n" + _HEAD + "- {apiVersion: v1, kind: Pod}\n",
    # ... behind a byte order mark (the one left after decode_text drops one: libyaml still reads the directive)
    "\ufeff%TAG !! tag:example.com,2000:\n---\n" + _HEAD + "- {apiVersion: v1, kind: Pod, metadata: {name: !!str a}}\n",
    # other line breaks, and not a List
    _HEAD.replace("\n", "\r\n") + "- {apiVersion: v1, kind: Pod}\r\n",
    _HEAD + "- {apiVersion: v1, kind: Pod, metadata: {name: \"a\u2028b\"}}\n",
    "apiVersion: v1\nkind: Pod\nitems:\n- a\n",
    "apiVersion: v1\nkind: List\nitems: []\n",
    "items:\n- {apiVersion: v1, kind: Pod}\n",  # no kind
    "apiVersion: v1\nkind: List\nitems:\n- a: 1\n  - b\n",  # broken
    "apiVersion: v1\nkind: List\nitems:\n  - {apiVersion: v1, kind: Pod}\n  x: 1\n",  # text after at column 2
    "apiVersion: v1\nkind: List\nitems:\n-\n  apiVersion: v1\n",  # an item line without a space after -
    "x: \"\nitems:\n- a\n\"\napiVersion: v1\nkind: List\n",  # items: inside a quoted string
    "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod}\nitems: 2\n",  # a duplicate key
    # a flow mapping as the root: "- " item lines are block entries inside it, which the whole read refuses
    "# export\n{apiVersion: v1, kind: List,\nitems:\n- {apiVersion: v1, kind: Pod}\n}\n",
    "---\n{apiVersion: v1, kind: List,\nitems:\n- a\n- b\n}\n",
    "!!map {apiVersion: v1, kind: List,\nitems:\n- a\n}\n",
    # limits: duplicate keys, a value that cannot be read
    _HEAD + "- {apiVersion: v1, kind: Pod}\n- {apiVersion: v1, kind: Pod, kind: Pod}\n",
    _HEAD + "- {apiVersion: v1, kind: Pod, n: " + "9" * 5000 + "}\n",
])
def test_other_shapes_and_refusals_are_left_to_the_whole_read(text: str) -> None:
    _same(text, streams=False)


def _nested(depth: int) -> str:
    """A list whose item's mappings nest ``depth`` levels (the document and ``items`` add two)."""
    value = "x"
    for _ in range(depth - 1):
        value = "{a: " + value + "}"
    return _HEAD + "- {apiVersion: v1, kind: Pod, spec: " + value + "}\n"


@pytest.mark.usefixtures("batch")
def test_depth_counts_from_the_documents_root() -> None:
    deepest = _nested(MAX_DEPTH - 2)  # as deep as the whole read allows...
    assert _whole(deepest) is not None
    _same(deepest, streams=True)
    assert _whole(_nested(MAX_DEPTH - 1)) is None  # ... and one level more is refused by both
    _same(_nested(MAX_DEPTH - 1), streams=False)


@pytest.mark.usefixtures("batch")
def test_alias_bomb_in_an_item_is_left_to_the_whole_read_which_refuses_it() -> None:
    bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"    a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
        f"*a{i - 1}, *a{i - 1}, *a{i - 1}]\n" for i in range(1, 9))
    text = _HEAD + "- apiVersion: v1\n  kind: Pod\n  spec:\n    " + bomb
    assert _whole(text) is None
    _same(text, streams=False)


def test_a_failure_part_way_raises_after_earlier_items(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_yaml_items, "BATCH_CHARS", 1)
    text = _HEAD + "- {apiVersion: v1, kind: Pod}\n- {apiVersion: v1, kind: Pod, kind: Pod}\n"
    items = plain_list(text, "f")
    assert next(items).value == {"apiVersion": "v1", "kind": "Pod"}
    with pytest.raises(NotPlain):
        next(items)


_SCALARS = st.one_of(
    st.sampled_from(["yes", "no", "on", "off", "y", "n", "~", "null", "0777", "0o17", "0x1F", "190:20:30", ".inf",
                     "-.Inf", ".NaN", "1e3", "1_000", "2024-01-02", "2024-01-02T03:04:05Z", "- x", "# c", "a: b",
                     "&a", "*a", "!x", "'", '"', "\\", "|", ">", "\t", " ", "", "- ", "\n- a"]),
    st.text(alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\r\x85\u2028\u2029"),
            max_size=12),
    st.integers(), st.floats(allow_nan=False), st.booleans(), st.none(),
)
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)), max_leaves=20)
_ITEMS = st.lists(st.fixed_dictionaries({"apiVersion": st.just("v1"), "kind": st.just("Pod")},
                                        optional={"metadata": _VALUES, "spec": _VALUES}), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=_ITEMS, flow=st.sampled_from([False, None]), width=st.sampled_from([20, 80]),
       one_item_batches=st.booleans())
def test_generated_lists_stream_equal_to_the_whole_parse(items: list[dict[str, Any]], flow: bool | None, width: int,
                                                         one_item_batches: bool,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_yaml_items, "BATCH_CHARS", 1 if one_item_batches else 1 << 18)
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items, "metadata": {}},
                          default_flow_style=flow, width=width, allow_unicode=True, sort_keys=False)
    streamed = _streamed(text)
    if streamed is not None:
        assert streamed == _whole(text)
    elif flow is False and not any(c in text for c in "\r&\x85\u2028\u2029"):
        # block style as kubectl writes it: streamed unless an item's line falls inside a quoted string
        assert "\n- " in text[text.index("\nitems:\n"):].replace("\n- ", "", len(items))


@pytest.mark.parametrize("value", ['!!bool maybe', '!!bool ""', '!!timestamp abc', '!!int ""', '!!int "-"', '!!int _',
                                   '!!float ""'])
def test_explicit_tags_pyyaml_cannot_construct_are_refused_not_a_traceback(value: str) -> None:
    """PyYAML's constructors raise KeyError, IndexError or AttributeError on these: a refusal, both ways."""
    text = _HEAD + "- {apiVersion: v1, kind: Pod, metadata: {name: " + value + "}}\n"
    with pytest.raises(DraConstructsError, match="cannot be read"):
        list(yaml_documents(text, "f"))
    assert _streamed(text) is None
