"""Parsing untrusted YAML and JSON with limits: nesting depth, alias expansion, duplicate keys, NaN.

Each limit fails with a :class:`~dra_constructs.errors.DraConstructsError` that names
``file:line`` and the limit (the command line's exit 2), never a parser traceback, a
``RecursionError`` or a hang. YAML goes through libyaml's composer (C, linear: aliases are
shared nodes; a document's node count is bounded first, from the parser's events; its per-node
Python callbacks cut down to a memoized tag lookup, :func:`_loader`); each document
is then checked and constructed in one iterative pass (faster than PyYAML's constructor) that
bounds depth and the nodes aliases add (expanded, as consumers would walk them) and rejects
duplicate keys, as the API server does for JSON. Documents with other tags (timestamps, merge
keys) are walked the same way and built by PyYAML. JSON's depth is checked after ``json.loads``
(whose own RecursionError is caught); ``NaN``/``Infinity`` are refused and lone surrogate
escapes become U+FFFD (what the API server's Go decoder does). Limits: docs/input-limits.md.
Pure Python.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import yaml

from dra_constructs.errors import DraConstructsError

_orjson: Any
try:  # a maintained C JSON parser (5-10x json.loads); the node agent's image may not have it
    import orjson as _orjson
except ImportError:  # pragma: no cover - the library depends on it; the agent's config is 1 MiB at most
    _orjson = None

__all__ = [
    "MAX_ALIAS_NODES", "MAX_ALIAS_NODES_PER_INPUT", "MAX_DEPTH", "MAX_NODES_PER_DOCUMENT", "YamlDocument",
    "count_nodes", "json_document", "line_of", "no_gc", "node_line", "proven_json", "yaml_documents",
]

#: Deepest nesting of mappings and sequences accepted. Real objects stay far below (a pod is
#: about 10 levels, the deepest CRD schemas about 60); the rules' walkers stay well within
#: Python's recursion limit.
MAX_DEPTH = 200
#: Nodes that aliases may add (expanded) per document: anchors for shared labels or env blocks
#: add tens; a "billion laughs" bomb adds billions and is refused after this many.
MAX_ALIAS_NODES = 100_000
#: Nodes (mappings, sequences, scalars, aliases) in one document. libyaml composes a whole
#: document before anything can look at it, ~300 bytes per node: 2,000,000 nodes are ~600 MB
#: (a 20 MB ``kind: List`` dump has about 2,000,000). 32 MiB of ``[1,1,1,...`` would be 16,000,000.
MAX_NODES_PER_DOCUMENT = 2_000_000
#: Documents (chunks between ``---`` markers) shorter than this cannot reach the node limit
#: (at most one node per 2 bytes) and are composed without counting first.
_COUNT_ABOVE = 2 * MAX_NODES_PER_DOCUMENT
_MARKERS = re.compile(r"^(?:---|\.\.\.)", re.MULTILINE)
#: ... and per input (all documents of a file or stdin): PyYAML-dumped files alias every shared
#: dict (about 10,000 nodes per MB); this bounds a bomb spread over many documents.
MAX_ALIAS_NODES_PER_INPUT = 1_000_000

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available
#: Implicit tags remembered per load (see :func:`_loader`): Kubernetes keys and common values repeat.
_RESOLVED_KEPT = 4096
_MERGE_TAG = "tag:yaml.org,2002:merge"
_LIMITS_DOC = "limits: docs/input-limits.md"


@dataclass(frozen=True)
class YamlDocument:
    """One constructed YAML document with its node (positions) and 1-based start line."""

    value: Any
    node: yaml.Node
    line: int


def line_of(text: str, line: int | None) -> str | None:
    """The source line ``line`` (1-based, shortened), shown as an error's value."""
    if not line:
        return None
    start = 0
    for _ in range(line - 1):
        start = text.find("\n", start) + 1
        if start == 0:
            return None
    end = text.find("\n", start)
    snippet = text[start:end if end >= 0 else len(text)].strip()
    return snippet[:80] or None


def node_line(node: yaml.Node, keys: Sequence[str | int]) -> int:
    """1-based line of the deepest key (or list item) of ``keys`` present under ``node``."""
    line = int(node.start_mark.line) + 1
    for key in keys:
        if isinstance(node, yaml.MappingNode) and isinstance(key, str):
            pair = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)
            if pair is None:
                break
            line, node = int(pair[0].start_mark.line) + 1, pair[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
            node = node.value[key]
            line = int(node.start_mark.line) + 1
        else:
            break
    return line


def _error(where: str, line: int | None, field: str, value: Any, problem: str, fix: str) -> DraConstructsError:
    return DraConstructsError(f"{where}:{line}" if line else where, field, value, problem, fix)


@contextmanager
def no_gc() -> Iterator[None]:
    """Parsing allocates millions of acyclic objects: skip the collector's passes over them.

    Wrap a whole load (not each document: re-enabling triggers a collection at once).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class _AliasBudget:
    """Nodes aliases may still add: in this document, and in the whole input."""

    def __init__(self) -> None:
        self.document = MAX_ALIAS_NODES
        self.total = MAX_ALIAS_NODES_PER_INPUT

    def spend(self, node: yaml.Node, where: str, field: str) -> None:
        self.document -= 1
        self.total -= 1
        if self.document < 0 or self.total < 0:
            limit = f"{MAX_ALIAS_NODES:,} extra nodes in a document" if self.document < 0 else (
                f"{MAX_ALIAS_NODES_PER_INPUT:,} extra nodes in one input")
            raise _error(where, node.start_mark.line + 1, field, "*alias",
                         f"aliases expand to more than {limit} (an alias bomb?)",
                         f"write the repeated parts out, or split the input ({_LIMITS_DOC})")


def _check_tree(root: yaml.Node, where: str, field: str, budget: _AliasBudget) -> None:
    """Depth, alias-expansion and duplicate-key limits of one document's node tree."""
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if id(node) in seen:  # a second visit: an alias expanded here
            budget.spend(node, where, field)
        else:
            seen.add(id(node))
        value = node.value
        if type(value) is not list:
            continue
        if depth > MAX_DEPTH:
            raise _error(where, node.start_mark.line + 1, field, f"depth>{MAX_DEPTH}",
                         f"nested deeper than {MAX_DEPTH} levels", f"flatten the document ({_LIMITS_DOC})")
        if isinstance(node, yaml.MappingNode):
            keys: dict[tuple[str, str], int] = {}
            for key, item in value:
                if isinstance(key, yaml.ScalarNode) and key.tag != _MERGE_TAG:
                    first = keys.get((key.tag, key.value))
                    if first is not None:
                        raise _error(where, key.start_mark.line + 1, field, key.value,
                                     f"duplicate key (first on line {first}); the API server rejects duplicate "
                                     "fields", "keep one of the two keys")
                    keys[key.tag, key.value] = key.start_mark.line + 1
                push((key, depth + 1))
                push((item, depth + 1))
        else:
            for item in value:
                push((item, depth + 1))


_UNSET = object()


class _Unusual(Exception):
    """A node the fast constructor leaves to PyYAML's (tags, merge keys, complex keys)."""


_TAG = "tag:yaml.org,2002:"
_NULL, _BOOL, _INT, _FLOAT, _MAP, _SEQ = (_TAG + t for t in ("null", "bool", "int", "float", "map", "seq"))
_STR = yaml.resolver.BaseResolver.DEFAULT_SCALAR_TAG  # the resolver's own object: ``==`` is an identity check


def _spend_alias(node: yaml.Node, depth: int, budget: _AliasBudget, where: str, field: str) -> None:
    """Charge the nodes an alias to ``node`` (at ``depth``) adds, as a consumer would walk them."""
    stack = [(node, depth)]
    while stack:
        item, level = stack.pop()
        budget.spend(node, where, field)
        value = item.value
        if type(value) is list:
            if level > MAX_DEPTH:
                raise _error(where, node.start_mark.line + 1, field, f"depth>{MAX_DEPTH}",
                             f"nested deeper than {MAX_DEPTH} levels (through an alias)",
                             f"flatten the document ({_LIMITS_DOC})")
            for child in value:
                if type(child) is tuple:
                    stack.extend((part, level + 1) for part in child)
                else:
                    stack.append((child, level + 1))


def _construct_checked(root: yaml.Node, loader: yaml.SafeLoader, where: str, field: str,
                       budget: _AliasBudget) -> Any:
    """Check the limits and construct a document in one iterative pass.

    PyYAML's constructor (generators, one Python call chain per node) is the slowest part of a
    load; plain documents (str/int/float/bool/null scalars, plain mappings and sequences) are
    built here directly, with the same scalar rules (PyYAML's own methods). Anything else
    raises :class:`_Unusual` and goes the general way. An alias to a mapping or sequence shares
    the object (as PyYAML does) and is charged its expanded size against ``budget``.
    """
    seen: dict[int, Any] = {}
    construct_int, construct_float, construct_bool = (
        loader.construct_yaml_int, loader.construct_yaml_float, loader.construct_yaml_bool)
    scalar_class, mapping_class = yaml.ScalarNode, yaml.MappingNode

    def scalar(node: Any) -> Any:  # a ScalarNode (the callers check its class)
        tag = node.tag
        if tag == _STR:
            return node.value
        if tag == _INT:
            return construct_int(node)
        if tag == _NULL:
            return None
        if tag == _BOOL:
            return construct_bool(node)
        if tag == _FLOAT:
            return construct_float(node)
        raise _Unusual

    def container(node: yaml.Node) -> Any:
        if node.tag == _MAP and node.__class__ is mapping_class:
            made: Any = {}
        elif node.tag == _SEQ and node.__class__ is not mapping_class:
            made = []
        else:
            raise _Unusual
        seen[id(node)] = made
        return made

    result = container(root) if root.__class__ is not scalar_class else None
    if result is None:
        return scalar(root)
    stack: list[tuple[yaml.Node, Any, int]] = [(root, result, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, target, depth = pop()
        if depth > MAX_DEPTH:
            raise _error(where, node.start_mark.line + 1, field, f"depth>{MAX_DEPTH}",
                         f"nested deeper than {MAX_DEPTH} levels", f"flatten the document ({_LIMITS_DOC})")
        if node.__class__ is mapping_class:
            for key_node, value_node in node.value:
                if key_node.__class__ is not scalar_class:
                    raise _Unusual
                key = key_node.value if key_node.tag == _STR else scalar(key_node)  # most keys: no call
                if key in target:
                    raise _error(where, key_node.start_mark.line + 1, field, key_node.value,
                                 "duplicate key; the API server rejects duplicate fields", "keep one of the two keys")
                if value_node.__class__ is scalar_class:
                    target[key] = value_node.value if value_node.tag == _STR else scalar(value_node)
                elif id(value_node) in seen:  # an alias
                    _spend_alias(value_node, depth + 1, budget, where, field)
                    target[key] = seen[id(value_node)]
                else:
                    target[key] = child = container(value_node)
                    push((value_node, child, depth + 1))
        else:
            append = target.append
            for item in node.value:
                if item.__class__ is scalar_class:
                    append(item.value if item.tag == _STR else scalar(item))
                elif id(item) in seen:  # an alias
                    _spend_alias(item, depth + 1, budget, where, field)
                    append(seen[id(item)])
                else:
                    append(child := container(item))
                    push((item, child, depth + 1))
    return result


def _mark_line(error: yaml.MarkedYAMLError) -> int | None:
    mark = error.problem_mark or error.context_mark
    return mark.line + 1 if mark is not None else None


def _largest_chunk(text: str) -> int:
    """Characters of the longest stretch between document markers (an upper bound per document)."""
    largest = previous = 0
    for match in _MARKERS.finditer(text):
        largest = max(largest, match.start() - previous)
        previous = match.start()
    return max(largest, len(text) - previous)


def _no_path(parent: Any, index: Any) -> None:
    """``descend_resolver`` without path resolvers: nothing to track."""


def _no_ascend() -> None:
    """``ascend_resolver`` without path resolvers: nothing to track."""


def _loader(text: str, resolve: Callable[..., Any] | None = None) -> yaml.SafeLoader:
    """A loader for ``text`` whose composer spends less Python per node: the same nodes and tags.

    libyaml's composer (C) calls back three Python methods per node: ``descend_resolver`` and
    ``ascend_resolver`` (they track the path for path resolvers, which SafeLoader has none of) and
    ``resolve`` (a plain scalar's implicit tag from its text: a dict lookup and regular expressions).
    Without path resolvers ``resolve`` is a function of its arguments alone, so it is memoized
    (C-level ``lru_cache``, :data:`_RESOLVED_KEPT` entries per load) and the path hooks do nothing:
    composing a 20,000-Pod export took 4.9 s, now 3.6 s (docs/performance.md, "YAML parsing").
    Hand-written because PyYAML has no switch for it; call :func:`_release` when done (the memo
    refers back to the loader). ``resolve``: a memo to use instead, shared by several loads (such a
    memo of any loader's ``resolve`` is right for all, as long as there are no path resolvers).
    """
    loader = _Loader(text)
    if not loader.yaml_path_resolvers:
        hooks = vars(loader)  # instance attributes shadow the resolver's methods for this loader only
        hooks["descend_resolver"] = _no_path
        hooks["ascend_resolver"] = _no_ascend
        hooks["resolve"] = resolve or functools.lru_cache(maxsize=_RESOLVED_KEPT)(loader.resolve)
    return loader


def _release(loader: yaml.SafeLoader) -> None:
    """Free what :func:`_loader` set up (the memo's reference cycle through the bound method)."""
    for name in ("descend_resolver", "ascend_resolver", "resolve"):
        vars(loader).pop(name, None)
    loader.dispose()


def count_nodes(text: str, where: str, field: str = "document") -> None:
    """Refuse a document of more than :data:`MAX_NODES_PER_DOCUMENT` nodes before it is composed.

    Only the parser's events are counted (nothing is kept), so the count needs no memory.
    Texts whose every document is short are not parsed at all; with libyaml, a stream of at most
    that many events in all is passed after a count in C (10 MB: 0.5 s instead of 3.8 s of Python).
    """
    if len(text) <= _COUNT_ABOVE or _largest_chunk(text) <= _COUNT_ABOVE:
        return
    raw_parse = getattr(_Loader, "raw_parse", None)
    if raw_parse is not None:  # libyaml: every event of the stream counted in C, no object made
        with contextlib.suppress(yaml.YAMLError):  # an error later on: count up to it below
            if raw_parse(_Loader(text)) <= MAX_NODES_PER_DOCUMENT:
                return  # events >= nodes (containers also end): no document can be over
    parser = _Loader(text)
    count = 0
    counted = (yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent, yaml.AliasEvent)
    try:
        while parser.check_event():
            event = parser.get_event()  # type: ignore[no-untyped-call]
            if isinstance(event, counted):
                count += 1
                if count > MAX_NODES_PER_DOCUMENT:
                    mark = event.start_mark
                    raise _error(where, mark.line + 1 if mark is not None else None, field,
                                 f">{MAX_NODES_PER_DOCUMENT:,} nodes",
                                 f"a document of more than {MAX_NODES_PER_DOCUMENT:,} nodes",
                                 "split it into several documents or runs (kubectl get ... per namespace; "
                                 f"{_LIMITS_DOC})")
            elif isinstance(event, yaml.DocumentStartEvent):
                count = 0
    except yaml.YAMLError:
        return  # reported with its line by the composer that runs next
    finally:
        parser.dispose()


def yaml_documents(text: str, where: str, field: str = "document") -> Iterator[YamlDocument]:
    """Every non-empty document of a YAML stream, checked against the limits, in order."""
    count_nodes(text, where, field)
    loader = _loader(text)
    budget = _AliasBudget()
    line: int | None = None
    try:
        while True:
            if not loader.check_node():
                break
            node = loader.get_node()
            if node is None:
                continue
            line = node.start_mark.line + 1
            budget.document, total = MAX_ALIAS_NODES, budget.total
            value: Any = _UNSET
            with contextlib.suppress(_Unusual):  # else the general path below
                value = _construct_checked(node, loader, where, field, budget)
            if value is _UNSET:
                budget.document, budget.total = MAX_ALIAS_NODES, total  # charged again below
                _check_tree(node, where, field, budget)
                value = loader.construct_document(node)
            yield YamlDocument(value, node, line)
    except yaml.MarkedYAMLError as error:
        at = _mark_line(error)
        problem = " ".join(p for p in (error.context, error.problem) if p) or "invalid YAML"
        opened = error.context_mark
        if opened is not None and at is not None and opened.line + 1 != at:
            problem += f" (opened on line {opened.line + 1})"
        raise _error(where, at, field, line_of(text, at), f"malformed YAML: {problem}",
                     "fix the YAML syntax at that line") from None
    except yaml.YAMLError as error:
        raise _error(where, None, field, None, f"malformed YAML: {error}", "fix the YAML syntax") from None
    except DraConstructsError:
        raise
    except RecursionError:
        raise _error(where, line, field, f"depth>{MAX_DEPTH}", f"nested deeper than {MAX_DEPTH} levels",
                     f"flatten the document ({_LIMITS_DOC})") from None
    except ValueError as error:  # an integer of more than 4,300 digits, a bad timestamp
        raise _error(where, line, field, None, f"a value cannot be read ({error})",
                     "write numbers as Kubernetes does (64-bit integers)") from None
    except (LookupError, AttributeError) as error:  # PyYAML's constructors of explicit tags: ``!!bool maybe``
        # (KeyError), ``!!int ""`` (IndexError), ``!!timestamp x`` (AttributeError)
        raise _error(where, line, field, None, f"a value cannot be read (an explicit tag on a value it does not "
                     f"fit: {type(error).__name__} {error})", "remove the !! tag or fix the value") from None
    finally:
        _release(loader)


_JSON_CONSTANT = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)', re.DOTALL)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class _Constant(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _Constant(name)


def _too_deep(value: Any, max_depth: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests more than ``max_depth`` lists and dicts (iteratively)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _clean_surrogates(value: Any) -> Any:
    """Lone surrogates (from ``\\ud800`` escapes) become U+FFFD, as Go's JSON decoder does."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_clean_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_clean_surrogates(k): _clean_surrogates(v) for k, v in value.items()}
    return value


def _duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return result


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _line_at(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


#: orjson reads integers of 2**64 and more (and below -2**63: 19 digits) as floats (json.loads: ints);
#: such texts go the careful way. Runs of digits are found on the bytes with every digit made ``0``
#: (``bytes.translate`` and a substring search: a regex took 20x as long on a slice dump).
_DIGITS_AS_ZERO = bytes(48 if 48 <= i <= 57 else 32 for i in range(256))
_NINETEEN_ZEROS = b"0" * 19


def _long_digits(data: bytes) -> bool:
    """Whether ``data`` has 19 digits in a row (an integer orjson may read as a float)."""
    return _NINETEEN_ZEROS in data.translate(_DIGITS_AS_ZERO)


def _fast_json(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """``text`` parsed by orjson when that gives what the checked path would, else :data:`_UNSET`.

    orjson refuses NaN/Infinity, lone surrogates and overflowing floats (the careful path below
    then reports them), reads integers past 64 bits as floats (a result with floats from a text
    with 20 digits in a row goes the careful way) and keeps the last of duplicate keys: the keys of the result are
    counted against an upper bound of the keys in the text (every key ends ``"`` + optional
    whitespace + ``:``, counted with the whitespace deleted; ``\\":`` inside a string only
    over-counts), and any shortfall goes the careful way.
    """
    if _orjson is None:
        return _UNSET
    try:
        value = _orjson.loads(text)
    except (_orjson.JSONDecodeError, RecursionError):
        return _UNSET
    return value if proven_json(text, value, max_depth) else _UNSET


#: JSON's whitespace (outside strings; inside one only the space may stand as itself).
_JSON_WHITESPACE = b" \t\n\r"


def proven_json(text: str | bytes, value: Any, max_depth: int = MAX_DEPTH) -> bool:
    """Whether ``value``, orjson's parse of ``text``, is what the checked path gives (see :func:`_fast_json`).

    The caller has ruled out surrogate escapes. Also used on several items' texts joined into
    one array (``_json_stream.parse_items``, which passes the bytes): every count here is a sum
    over the items.
    """
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    # Key ends: with JSON's whitespace deleted (one C pass), every key ends ``":`` - its closing
    # quote, then its colon - after an even number of backslashes (0, or counted among the >= 2).
    # ``\":`` (an escaped quote in a string, e.g. last-applied JSON) is no key. Deleting spaces
    # inside strings only adds such escaped quotes or quotes before a colon: over-counts. (A
    # backslash is never followed by raw whitespace in JSON, so no run of them is joined to an odd
    # one before a key's closing quote: each run before a space or a quote is whole escapes.)
    packed = data.translate(None, _JSON_WHITESPACE)
    bound = packed.count(b'":')
    if b"\\" in packed:
        bound += packed.count(b'\\\\":') - packed.count(b'\\":')
    long_digits = _long_digits(data)
    if not long_digits and _dumped_keys(value, max_depth) == bound:
        return True  # at least ``bound`` keys and within the depth: proven without walking it
    keys, deep, floats = _keys_and_depth(value, max_depth)
    return not (deep or keys != bound or (floats and long_digits))


def _dumped_keys(value: Any, max_depth: int) -> int | None:
    """A lower bound of the keys of ``value``, or ``None`` when it may nest deeper than ``max_depth``.

    Counted in C on orjson's 2-space indented output instead of walking the value in Python:
    strings hold no raw newline and escape every quote, so a line's indent is twice the depth of
    the container holding its entry (an empty container is an entry one level up: a container
    deeper than ``max_depth`` puts a line at 2 x ``max_depth`` spaces or more, and then the exact
    walk decides), and every key is ``"name": `` with an unescaped quote (``\\": `` is an escaped
    quote in a string - or a key ending in a backslash, which this only under-counts).
    """
    try:
        dumped = _orjson.dumps(value, option=_orjson.OPT_INDENT_2)
    except _orjson.JSONEncodeError:  # nested past orjson's own limit
        return None
    if b"\n" + b" " * (2 * max_depth) in dumped:
        return None
    return int(dumped.count(b'": ') - dumped.count(b'\\": '))


def _keys_and_depth(value: Any, max_depth: int = MAX_DEPTH) -> tuple[int, bool, bool]:
    """Keys of every mapping in ``value``, whether it nests deeper than ``max_depth``, whether it holds floats."""
    keys = 0
    floats = type(value) is float  # a top-level number, too
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        item, depth = pop()
        if type(item) is dict:
            keys += len(item)
            children: Any = item.values()
        elif type(item) is list:
            children = item
        else:
            continue
        if depth > max_depth:
            return keys, True, floats
        for child in children:
            kind = type(child)
            if kind is dict or kind is list:
                push((child, depth + 1))
            elif kind is float:
                floats = True
    return keys, False, floats


def json_document(text: str, where: str, field: str = "document", *, first_line: int | None = None,
                  nested: int = 0) -> Any:
    """One JSON value, checked against the limits.

    Parsed by orjson when the result is provably the same as the checked stdlib path's (no
    duplicate keys, no surrogate escapes, within the depth), else by ``json.loads`` with the checks.
    ``first_line``: the line ``text`` starts on in its file (a JSON-lines line); errors without
    a position (depth) then name it too. ``nested``: the levels the value sits under in its file
    (an item of a ``List`` read on its own: 2), which count towards the depth limit.
    """
    max_depth = MAX_DEPTH - nested
    if not _SURROGATE_ESCAPE.search(text):
        fast = _fast_json(text, max_depth)
        if fast is not _UNSET:
            return fast
    base = first_line or 1
    try:
        value = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_duplicate_keys)
    except json.JSONDecodeError as error:
        raise _error(where, base + error.lineno - 1, field, line_of(text, error.lineno),
                     f"malformed JSON: {error.msg} (column {error.colno})",
                     "fix the JSON syntax at that line") from None
    except _Constant as constant:
        found = next((m for m in _JSON_CONSTANT.finditer(text) if m.group(1)), None)
        at = base + _line_at(text, found.start()) - 1 if found else None
        raise _error(where, at, field, str(constant), "NaN and Infinity are not JSON numbers",
                     "write a finite number (the API server rejects NaN and Infinity)") from None
    except _DuplicateKey as duplicate:
        key = re.escape(json.dumps(duplicate.key, ensure_ascii=False))
        found_at = [m.start() for m in re.finditer(key + r"\s*:", text)]
        at = base + _line_at(text, found_at[1]) - 1 if len(found_at) > 1 else None
        raise _error(where, at, field, duplicate.key,
                     "duplicate key; the API server rejects duplicate fields", "keep one of the two keys") from None
    except RecursionError:
        raise _error(where, first_line, field, f"depth>{MAX_DEPTH}",
                     f"nested deeper than {MAX_DEPTH} levels", f"flatten the document ({_LIMITS_DOC})") from None
    except ValueError as error:  # an integer of more than 4,300 digits
        raise _error(where, first_line, field, None, f"a value cannot be read ({error})",
                     "write numbers as Kubernetes does (64-bit integers)") from None
    if _too_deep(value, max_depth):
        raise _error(where, first_line, field, f"depth>{MAX_DEPTH}",
                     f"nested deeper than {MAX_DEPTH} levels", f"flatten the document ({_LIMITS_DOC})")
    if _SURROGATE_ESCAPE.search(text):
        value = _clean_surrogates(value)
    return value
