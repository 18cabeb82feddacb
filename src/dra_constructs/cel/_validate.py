"""Checks the Kubernetes CEL environment runs after type checking, which cel-cpp does not.

Kubernetes enables cel-go's AST validators (``base.go``, 1.29+): duration and timestamp
literals, regular-expression literals of ``matches`` and homogeneous aggregate literals (list and
map literals anywhere under a ``format`` call are exempt), and the strings extension's
``format`` validator (a literal format string checked against a list-literal argument); and
the DRA compiler requires a ``bool`` (or ``dyn``) result. Ported rules of cel-go
``cel/validator.go``; a literal is "valid" when cel-cpp (RE2, like Go's ``regexp``) can evaluate it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import Any

from cel_expr_python import cel

from dra_constructs.cel import _astpb
from dra_constructs.cel._gotypes import type_name
from dra_constructs.cel._regex import compile_pattern
from dra_constructs.cel._tree import Tree

__all__ = [
    "backtick_issue",
    "backtick_offset",
    "format_type",
    "location",
    "might_need_validation",
    "regex_constant_issues",
    "regex_literal_ok",
    "validate",
]


def format_type(t: Any) -> str:
    """cel-go's ``FormatCELType`` spelling of a checked type."""
    if t is None:
        return "dyn"
    which = t.WhichOneof("kind")
    if which == "primitive":
        return _astpb.PRIMITIVES.get(t.primitive, "dyn")
    if which == "dyn":
        return "dyn"
    if which == "null":
        return "null_type"
    if which == "well_known":
        return _astpb.WELL_KNOWN.get(t.well_known, "dyn")
    if which == "wrapper":
        return f"wrapper({_astpb.PRIMITIVES.get(t.wrapper, 'dyn')})"
    if which == "list_type":
        return f"list({format_type(t.list_type.elem_type)})"
    if which == "map_type":
        return f"map({format_type(t.map_type.key_type)}, {format_type(t.map_type.value_type)})"
    if which == "message_type":
        return str(t.message_type)
    if which == "type_param":
        return str(t.type_param)
    if which == "type":
        return f"type({format_type(t.type)})"
    if which == "abstract_type":
        params = ", ".join(format_type(p) for p in t.abstract_type.parameter_types)
        return f"{t.abstract_type.name}({params})" if params else str(t.abstract_type.name)
    if which == "error":
        return "*error*"
    return "dyn"


def location(checked: Any, expr_id: int, text: str) -> tuple[int, int]:
    """1-based line and column of node ``expr_id`` (offsets count code points, as in cel-go)."""
    offset = checked.source_info.positions.get(expr_id, 0)
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1)
    return line, column + 1


def issue(checked: Any, expr_id: int, text: str, message: str) -> str:
    """``ERROR: <input>:L:C: message`` plus the source line and a caret, as cel-go prints it."""
    line, column = location(checked, expr_id, text)
    lines = text.split("\n")
    source = lines[line - 1] if 0 < line <= len(lines) else ""
    caret = "." * (column - 1) + "^"
    return f"ERROR: <input>:{line}:{column}: {message}\n | {source}\n | {caret}"


def _children(node: Any) -> list[Any]:
    """The direct sub-expressions of a light-tree node (``_tree``)."""
    kind = node.kind
    if kind == "select_expr":
        return [node.operand]
    if kind == "call_expr":
        return [*node.args, node.target] if node.target is not None else node.args
    if kind == "list_expr":
        return node.elements  # type: ignore[no-any-return]
    if kind == "struct_expr":
        children = []
        for entry in node.entries:
            children.append(entry.value)
            if entry.map_key is not None:
                children.append(entry.map_key)
        return children
    if kind == "comprehension_expr":
        return [node.iter_range, node.accu_init, node.loop_condition, node.loop_step, node.result]
    return []


def _walk(e: Any) -> Iterator[Any]:
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(_children(node))


@cache
def _literal_env() -> Any:
    return cel.NewEnv()


@cache
def _literal_ok(function: str, literal: str) -> bool:
    """Does ``function(literal)`` (or ``''.matches(literal)``) evaluate without error in cel-cpp?

    A regular expression is compiled with RE2 directly (cel-cpp's ``matches`` uses RE2 too).
    """
    if function == "matches":
        try:
            compile_pattern(literal)
        except ValueError:
            return False
        return True
    quoted = '"' + literal.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'
    source = f"''.matches({quoted})" if function == "matches" else f"{function}({quoted})"
    try:
        value = _literal_env().compile(source).eval()
    except Exception:  # an engine refusal is a failed literal, not a crash
        return False
    return bool(value.type() != cel.Type.ERROR)


def regex_literal_ok(pattern: str) -> bool:
    """Is ``pattern`` a valid regular expression (RE2, as Go's ``regexp``)?"""
    return _literal_ok("matches", pattern)


def _unwrap_optional(t: Any) -> Any:
    if t is not None and t.WhichOneof("kind") == "abstract_type" and t.abstract_type.name == "optional_type" \
            and t.abstract_type.parameter_types:
        return t.abstract_type.parameter_types[0]
    return t


def _equivalent(a: Any, b: Any) -> bool:
    return bool(a.SerializeToString(deterministic=True) == b.SerializeToString(deterministic=True))


_PRIMITIVE_KINDS = _astpb.PRIMITIVES
_WELL_KNOWN_KINDS = {2: "timestamp", 3: "duration"}
#: Argument kinds each format clause accepts (cel-go ext ``stringFormatChecker``); ``dyn`` always passes.
_CLAUSE_KINDS = {
    "s": {"list", "map", "int", "uint", "double", "bool", "string", "timestamp", "bytes", "duration", "type",
          "null"},
    "d": {"int", "uint"},
    "f": {"double", "string"},
    "e": {"double", "string"},
    "b": {"int", "uint", "bool"},
    "x": {"int", "uint", "string", "bytes"},
    "X": {"int", "uint", "string", "bytes"},
    "o": {"int", "uint"},
}
_KINDS_TEXT = "strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps"
#: cel-go's messages for a clause given an argument of the wrong type.
_CLAUSE_ERRORS = {
    "s": f"string clause can only be used on {_KINDS_TEXT}, was given {{}}",
    "d": "decimal clause can only be used on integers, was given {}",
    "f": "fixed-point clause can only be used on doubles, was given {}",
    "e": "scientific clause can only be used on doubles, was given {}",
    "b": "only integers and bools can be formatted as binary, was given {}",
    "x": "only integers, byte buffers, and strings can be formatted as hex, was given {}",
    "X": "only integers, byte buffers, and strings can be formatted as hex, was given {}",
    "o": "octal clause can only be used on integers, was given {}",
}


def _kind(t: Any) -> str:
    """The runtime kind of a checked type, as cel-go's ``Type.Kind()`` compares them."""
    which: str | None = t.WhichOneof("kind") if t is not None else None
    if which == "primitive":
        return _PRIMITIVE_KINDS.get(t.primitive, "other")
    if which == "well_known":
        return _WELL_KNOWN_KINDS.get(t.well_known, "other")
    if which is not None and which in ("list_type", "map_type", "dyn", "type", "null"):
        return {"list_type": "list", "map_type": "map"}.get(which, which)
    return "other"


def _format_string_issue(fmt: str, args: list[Any], types: Any) -> tuple[str, int | None] | None:
    """cel-go's static check of ``'<fmt>'.format([<args>])``: (message, node id or None) or ``None``."""

    def verify_string(node: Any) -> Any:
        """``None`` when valid, else the offending (sub-)node (cel-go ``verifyString``)."""
        kind = _kind(types.get(node.id))
        if kind == "dyn":
            return None
        if kind not in _CLAUSE_KINDS["s"]:
            return node
        which = node.kind
        if which == "list_expr":
            for element in node.elements:
                bad = verify_string(element)
                if bad is not None:
                    return bad
        elif which == "struct_expr" and not node.message_name:
            for entry in node.entries:
                bad = verify_string(entry.map_key)
                if bad is None:
                    bad = verify_string(entry.value)
                if bad is not None:
                    return bad
        return None

    i, arg_index, requested = 0, 0, 0
    while i < len(fmt):
        if fmt[i] != "%":
            i += 1
            continue
        if fmt.startswith("%%", i):
            i += 2
            continue
        requested += 1
        if i + 1 >= len(fmt):
            return "unexpected end of string", None
        if arg_index >= len(args):
            return f"index {arg_index} out of range", None
        j = i + 1
        if fmt[j] == ".":
            j += 1
            start = j
            while j < len(fmt) and fmt[j].isascii() and fmt[j].isdigit():
                j += 1
            if j >= len(fmt):
                return ("could not parse formatting clause: error while parsing precision: "
                        "could not find end of precision specifier"), None
            if j == start:
                return ("could not parse formatting clause: error while parsing precision: error while "
                        'converting precision to integer: strconv.Atoi: parsing "": invalid syntax'), None
        verb = fmt[j]
        if verb not in _CLAUSE_KINDS:
            return f'could not parse formatting clause: unrecognized formatting clause "{verb}"', None
        arg = args[arg_index]
        if verb == "s":
            bad = verify_string(arg)
        else:
            kind = _kind(types.get(arg.id))
            bad = None if kind == "dyn" or kind in _CLAUSE_KINDS[verb] else arg
        if bad is not None:
            given = type_name(types.get(bad.id))
            return "error during formatting: " + _CLAUSE_ERRORS[verb].format(given), bad.id
        arg_index += 1
        i = j + 1
    if len(args) > requested:
        return f"too many arguments supplied to string.format (expected {requested}, got {len(args)})", None
    return None


#: A list literal (``[`` not after a value, or after the ``in`` keyword) or a map literal may be present.
_AGGREGATE = re.compile(r"\{|(?:^|[^\w\s\])]|\bin)\s*\[")
_VALIDATED_CALLS = ("format", "duration", "timestamp", "matches")
_DYN = _astpb.Type()
_DYN.dyn.SetInParent()


def might_need_validation(text: str) -> bool:
    """Can any AST validator report something? (Cheap text test: no literal, no validated call.)"""
    return any(name in text for name in _VALIDATED_CALLS) or _AGGREGATE.search(text) is not None


def validation_reads_types(text: str) -> bool:
    """Can an AST validator read a node's type? Only the ``format`` validator and the homogeneous
    list/map literal checks do (the ``duration``/``timestamp``/``matches`` literal checks do not)."""
    return "format" in text or _AGGREGATE.search(text) is not None


def validate(checked: Any, tree: Tree, text: str, types: Any = None, needed: bool | None = None) -> list[str]:
    """The issues of the Kubernetes AST validators, in cel-go's format (``types``: cel-go's view;
    ``needed``: ``might_need_validation(text)`` when the caller has it).

    One walk: the ``format`` validator, literal arguments of ``duration``/``timestamp``/``matches``,
    and homogeneous list/map literals (those under a ``format`` call are exempt). Issues are
    ordered by position, as cel-go prints them.
    """
    if not (might_need_validation(text) if needed is None else needed):
        return []
    found: list[tuple[int, str]] = []
    types = tree.types if types is None else types
    positions = checked.source_info.positions

    def report(node_id: int, message: str) -> None:
        found.append((positions.get(node_id, 0), issue(checked, node_id, text, message)))

    stack: list[tuple[Any, bool]] = [(tree.root, False)]
    while stack:
        node, under_format = stack.pop()
        kind = node.kind
        if kind == "call_expr":
            call = node
            function = call.function
            if function == "format":
                under_format = True
                if call.target is not None and len(call.args) == 1:
                    target, arg = call.target, call.args[0]
                    if target.kind == "const_expr" and target.const_kind == "string_value" \
                            and arg.kind == "list_expr":
                        problem = _format_string_issue(target.value, arg.elements, types)
                        if problem is not None:
                            message, bad_id = problem
                            report(bad_id if bad_id is not None else node.id, message)
            elif function in ("duration", "timestamp", "matches") and call.args:
                arg = call.args[0]
                if arg.kind == "const_expr" and arg.const_kind == "string_value" \
                        and not _literal_ok(function, arg.value):
                    report(arg.id, f"invalid {function} argument")
            if call.target is not None:
                stack.append((call.target, under_format))
            stack.extend((child, under_format) for child in call.args)
        elif kind == "list_expr":
            elements = node.elements
            if not under_format and len(elements) > 1:
                _check_list(node, types, report)
            stack.extend((child, under_format) for child in elements)
        elif kind == "struct_expr":
            entries = node.entries
            if not under_format and not node.message_name and len(entries) > 1:
                _check_map(node, types, report)
            for entry in entries:
                stack.append((entry.value, under_format))
                if entry.map_key is not None:
                    stack.append((entry.map_key, under_format))
        elif kind == "select_expr":
            stack.append((node.operand, under_format))
        elif kind == "comprehension_expr":
            comp = node
            stack.extend((child, under_format) for child in (comp.iter_range, comp.accu_init, comp.loop_condition,
                                                             comp.loop_step, comp.result))
    found.sort(key=lambda item: item[0])
    return [message for _, message in found]


def _check_list(node: Any, types: Any, report: Any) -> None:
    optional = node.optional_indices
    first = None
    for index, element in enumerate(node.elements):
        et = types.get(element.id, _DYN)
        if index in optional:
            et = _unwrap_optional(et)
        if first is None:
            first = et
        elif not _equivalent(first, et):
            report(element.id, f"expected type '{format_type(first)}' but found '{format_type(et)}'")
            return


def _check_map(node: Any, types: Any, report: Any) -> None:
    key_type = value_type = None
    for entry in node.entries:
        kt = types.get(entry.map_key.id, _DYN)
        vt = types.get(entry.value.id, _DYN)
        if entry.optional_entry:
            vt = _unwrap_optional(vt)
        if key_type is None:
            key_type, value_type = kt, vt
            continue
        if not _equivalent(key_type, kt):
            report(entry.map_key.id, f"expected type '{format_type(key_type)}' but found '{format_type(kt)}'")
        if value_type is not None and not _equivalent(value_type, vt):
            report(entry.value.id, f"expected type '{format_type(value_type)}' but found '{format_type(vt)}'")


# Constant regular expressions compiled when the program is built (cel-go ``OptOptimize`` +
# ``interpreter.CompileRegexConstants``): the standard ``matches`` and Kubernetes' ``find`` and
# ``findAll`` (apiserver ``pkg/cel/library/regex.go``). The pattern is interpretable argument 1,
# counting the receiver of a member call. An invalid literal fails ``env.Program`` ("program
# instantiation failed"), so the DRA compiler returns an error before estimating the cost.
_REGEX_CONSTANT_FUNCTIONS = ("matches", "find", "findAll")


def regex_constant_issues(tree: Tree, text: str) -> list[str]:
    """``program instantiation failed`` messages for invalid constant regex patterns."""
    issues: list[str] = []
    if not any(name in text for name in _REGEX_CONSTANT_FUNCTIONS):
        return issues
    for node in _walk(tree.root):
        if node.kind != "call_expr" or node.function not in _REGEX_CONSTANT_FUNCTIONS:
            continue
        args = ([node.target] if node.target is not None else []) + node.args
        if len(args) < 2:
            continue
        pattern = args[1]
        if pattern.kind != "const_expr" or pattern.const_kind != "string_value":
            continue
        if not _literal_ok("matches", pattern.value):
            issues.append(f"program instantiation failed: error parsing regexp: invalid regular expression "
                          f"`{pattern.value}`")
    return issues


def backtick_offset(text: str) -> int | None:
    """Offset of the first backtick outside string literals and comments, or ``None``.

    The Kubernetes CEL environment does not enable cel-go's backtick-escaped identifiers
    (``EnableIdentEscapeSyntax``, cel-go >= 0.23; unknown to 0.22's grammar), which cel-cpp
    parses by default.
    """
    if "`" not in text:
        return None
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == "`":
            return i
        if char == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if char in "'\"":
            raw = i > 0 and text[i - 1] in "rR" and (i < 2 or not (text[i - 2].isalnum() or text[i - 2] == "_"))
            quote = char * 3 if text.startswith(char * 3, i) else char
            j = i + len(quote)
            while j < n and not text.startswith(quote, j):
                if text[j] == "\\" and not raw:
                    j += 1
                elif text[j] == "\n" and len(quote) == 1:
                    break
                j += 1
            i = j + len(quote)
            continue
        i += 1
    return None


def backtick_issue(text: str, offset: int, escape_syntax_known: bool) -> str:
    """cel-go's parse error for a backtick: ``unsupported syntax`` (0.24+) or a lexer error (0.22)."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    source = text.split("\n")[line - 1]
    message = "unsupported syntax: '`'" if escape_syntax_known else "Syntax error: token recognition error at: '`'"
    return f"ERROR: <input>:{line}:{column}: {message}\n | {source}\n | {'.' * (column - 1)}^"
