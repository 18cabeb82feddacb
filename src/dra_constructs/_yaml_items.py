"""Read the items of a YAML ``*List`` document a few at a time, in memory bounded by a batch (issue 25).

``kubectl get -A -o yaml`` prints one document: a block mapping at column 0 whose ``items:`` line
is followed by a block sequence, each item a line ``- key: ...`` at one column (0 as kubectl and
PyYAML print it, or more) with every other line of the item deeper. :func:`plain_list` finds the
item lines with regular expressions and composes the items in batches of about
:data:`BATCH_CHARS` characters, each batch as its own text ``items:\\n<the items' lines>``: the
same lines after the same ``items:`` key at column 0 of a block mapping, so libyaml scans and
parses them as it does inside the file (the same tokens, nodes, tags, YAML 1.1 values, and the
same depth: the item is two levels below the document's root). Values are built by
``_safe_load``'s checked constructor, with the same limits (depth, duplicate keys, the node
limit for a batch over 4,000,000 characters, i.e. one huge item).

The split is trusted only when it is *the* parse of the file:

- the text around the items (everything before the ``items:`` line's end, and everything from
  the first line after the items that starts at column 0) parses, with a random token as the
  value of ``items``, as one document: a block mapping at column 0 whose ``items`` key is on that line
  at column 0, plain, with that token as its plain value, and a ``*List`` ``kind``. Then the
  scanner is, at the ``items:`` line of the file, where it is at the ``items:`` line of a batch;
- no ``%`` directive before it (a ``%TAG`` would change what the items' tags mean), no ``\\r``
  or other line break than ``\\n`` (line numbers are counted on ``\\n``), no ``&`` in that text;
- each batch parses as one document with exactly as many items as it has item lines, each item's
  node starting on its own item line (an item line inside a quoted string, or a batch cut inside
  one, fails this or the parse);
- no anchor is used by an alias in any batch (an item with an ``&`` is walked for shared nodes):
  the alias limits count per document, so a file with aliases is read whole as before.

Anything else - another shape, any syntax or limit error, an alias - raises :class:`NotPlain`
and the caller reads the text whole through the usual loader, which reports exactly as before.
Items already yielded are then void: the caller starts over. The node limit
(``MAX_NODES_PER_DOCUMENT``) applies to each batch, not to the document: a streamed ``List``
may hold any number of items (docs/input-limits.md).
"""

from __future__ import annotations

import functools
import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from dra_constructs._safe_load import (
    _COUNT_ABOVE,
    _RESOLVED_KEPT,
    _AliasBudget,
    _check_tree,
    _construct_checked,
    _Loader,
    _loader,
    _release,
    _Unusual,
    count_nodes,
    yaml_documents,
)
from dra_constructs.errors import DraConstructsError

__all__ = ["BATCH_CHARS", "NotPlain", "YamlItem", "plain_list"]

#: Characters of item text composed at a time (a batch holds at least one item).
BATCH_CHARS = 1 << 18

_ITEMS_LINE = re.compile(r"items:[ ]*\n")
#: From the ``items:`` line's end: blank and comment lines, then the first item line (its indent).
_FIRST_ITEM = re.compile(r"(?:[ ]*(?:#[^\n]*)?\n)*( *)- ")
#: Line breaks libyaml counts besides ``\n``.
_OTHER_BREAKS = ("\x85", "\u2028", "\u2029")
_PREFIX = "items:\n"


class NotPlain(Exception):
    """The text is not a plain YAML ``*List`` this reader can split (or a batch fails): read it whole."""


@dataclass(frozen=True, slots=True)
class YamlItem:
    """One item: its value, the 1-based line of its node, the characters ``[start, end)`` of its text."""

    value: Any
    line: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class _Layout:
    items_end: int  # the ``items:`` line's newline
    first: int  # the first item line's start
    end: int  # where the text after the items starts
    indent: int  # the column of the items' ``-``


def _layout(text: str) -> _Layout | None:
    """Where the items are, found by text alone (checked by :func:`plain_list`); ``None``: not this shape."""
    if "\r" in text or (not text.isascii() and any(b in text for b in _OTHER_BREAKS)):
        return None
    at = 0 if text.startswith("items:") else text.find("\nitems:") + 1  # (a C search: most files have none)
    opened = _ITEMS_LINE.match(text, at) if at or text.startswith("items:") else None
    # (a directive may follow a byte order mark: libyaml's reader drops one at the start)
    if opened is None or text.startswith(("%", "\ufeff%")) or text.find("\n%", 0, at) >= 0:
        return None
    first = _FIRST_ITEM.match(text, opened.end())
    if first is None:
        return None
    indent = len(first.group(1))
    # The items end at the first line that is neither deeper than their ``-``, nor an item line,
    # nor blank or a comment; it must start at column 0.
    # (Each pattern starts with a literal newline: the regular expression engine skips to those.)
    ending = re.compile(rf"\n(?! {{{indent + 1}}}| {{{indent}}}- |[ ]*(?:#|\n|\Z))")
    found = ending.search(text, first.start(1) - 1)
    end = found.start() + 1 if found is not None else len(text)
    if text[end:end + 1] == " ":
        return None
    return _Layout(opened.end() - 1, first.start(1), end, indent)


def _check_skeleton(text: str, layout: _Layout, where: str, field: str) -> None:
    """The text around the items parses as a ``*List`` whose ``items`` is where they were (else :class:`NotPlain`)."""
    token = f"dra-items-{secrets.token_hex(8)}"
    skeleton = f"{text[:layout.items_end]} {token}\n{text[layout.end:]}"
    if "&" in skeleton:
        raise NotPlain
    try:
        # (other documents may only be empty: the loader reads nothing of a null document)
        documents = [d for d in yaml_documents(skeleton, where, field) if d.value is not None]
    except DraConstructsError:
        raise NotPlain from None
    if len(documents) != 1:
        raise NotPlain
    node, value = documents[0].node, documents[0].value
    line = text.count("\n", 0, layout.items_end)  # 0-based line of ``items:``
    if (not isinstance(node, yaml.MappingNode) or node.flow_style or node.start_mark.column != 0
            or not isinstance(value, dict)):  # (in a flow mapping the item lines would be block entries)
        raise NotPlain
    pairs = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == "items"]
    if len(pairs) != 1:
        raise NotPlain
    key, item = pairs[0]
    if (key.style or key.start_mark.line != line or key.start_mark.column != 0
            or not isinstance(item, yaml.ScalarNode) or item.style or item.value != token
            or item.start_mark.line != line or value.get("items") != token):
        raise NotPlain
    kind, api_version = value.get("kind"), value.get("apiVersion")
    if not (isinstance(kind, str) and kind.endswith("List") and isinstance(api_version, str) and api_version):
        raise NotPlain


class _NoAliases(_AliasBudget):
    """An alias budget that refuses the first alias: a file with aliases is read whole."""

    def spend(self, node: yaml.Node, where: str, field: str) -> None:
        raise NotPlain


def _parse_batch(text: str, count: int, resolve: Callable[..., Any], where: str, field: str
                 ) -> tuple[list[Any], list[yaml.Node]]:
    """The ``count`` items of ``text`` (their lines, composed under ``items:``): values and nodes."""
    source = _PREFIX + text
    if len(source) > _COUNT_ABOVE:
        try:
            count_nodes(source, where, field)
        except DraConstructsError:
            raise NotPlain from None
    loader = _loader(source, resolve)  # one memo for every batch
    try:
        root = loader.get_single_node()
        if not isinstance(root, yaml.MappingNode) or len(root.value) != 1:
            raise NotPlain
        sequence = root.value[0][1]
        if not isinstance(sequence, yaml.SequenceNode) or len(sequence.value) != count:
            raise NotPlain
        if "&" in text:
            _check_tree(root, where, field, _NoAliases())
        try:
            value = _construct_checked(root, loader, where, field, _NoAliases())
        except _Unusual:
            _check_tree(root, where, field, _NoAliases())
            value = loader.construct_document(root)
    except (yaml.YAMLError, DraConstructsError, RecursionError, ValueError, LookupError, AttributeError):
        raise NotPlain from None  # (the last two: PyYAML's constructors of some explicit tags; see yaml_documents)
    finally:
        _release(loader)
    items = value.get("items") if isinstance(value, dict) else None
    if not isinstance(items, list) or len(items) != count:
        raise NotPlain
    return items, list(sequence.value)


def plain_list(text: str, where: str, field: str = "document") -> Iterator[YamlItem]:
    """The items of ``text``, a plain YAML ``*List`` document, in order (see the module docstring).

    Raises :class:`NotPlain` (at once, or part-way) when ``text`` must be read whole instead.
    """
    layout = _layout(text)
    if layout is None or _Loader.yaml_path_resolvers:  # (``resolve`` must depend on its arguments alone)
        raise NotPlain
    _check_skeleton(text, layout, where, field)
    marker = "\n" + " " * layout.indent + "- "
    template = _Loader("")
    resolve = functools.lru_cache(maxsize=_RESOLVED_KEPT)(template.resolve)
    try:
        batch: list[tuple[int, int]] = []  # (start, 0-based line) of the items waiting
        position, line = layout.first, text.count("\n", 0, layout.first)
        found = layout.first - 1  # (the newline before the first item line)
        while found >= 0:
            start = found + 1
            found = text.find(marker, start, layout.end)
            line += text.count("\n", position, start)
            position = start
            if batch and start - batch[0][0] >= BATCH_CHARS:
                yield from _batch(text, batch, start, resolve, where, field)
                batch = []
            batch.append((start, line))
        if not batch:
            raise NotPlain
        yield from _batch(text, batch, layout.end, resolve, where, field)
    finally:
        resolve.cache_clear()
        template.dispose()


def _batch(text: str, batch: list[tuple[int, int]], end: int, resolve: Callable[..., Any], where: str,
           field: str) -> Iterator[YamlItem]:
    first, first_line = batch[0]
    values, nodes = _parse_batch(text[first:end], len(batch), resolve, where, field)
    ends = [start for start, _ in batch[1:]] + [end]
    for (start, line), stop, value, node in zip(batch, ends, values, nodes, strict=True):
        at = node.start_mark.line - 1 + first_line  # 0-based line in ``text`` (the batch's line 1 is ``first_line``)
        if at != line:
            raise NotPlain
        yield YamlItem(value, at + 1, start, stop)

