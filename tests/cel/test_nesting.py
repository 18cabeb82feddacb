"""Nesting: cel-go's two parser limits (250) exactly; cel-cpp (32) reached in pieces below them."""

from __future__ import annotations

import re

import pytest

from dra_constructs.cel import CelRuntimeError, Device, _deep, check, evaluate
from dra_constructs.cel._astpb import decode_checked
from dra_constructs.cel._depth import LISTENER_ERROR, VISITOR_ERROR, cel_go_depth_error, parse
from dra_constructs.cel._env import check_env, check_env_with, env_key
from dra_constructs.cel._nesting import collapse_redundant_parens
from dra_constructs.cel.checker import compile_selector
from dra_constructs.target import Target

INDEX = "device.attributes['gpu.nvidia.com'].index == 3"
GPU = Device("gpu.nvidia.com", "p", "d", {"index": {"int": 3}}, {})
LISTENER = f"compilation failed: {LISTENER_ERROR}"
VISITOR = f"compilation failed: {VISITOR_ERROR}"


def parens(n: int) -> str:
    return "(" * n + "true" + ")" * n


def parens_around_index(n: int) -> str:  # the index `['gpu.nvidia.com']` opens one more `expr`
    return "(" * n + INDEX + ")" * n


def nested_and(n: int) -> str:
    return "(true && " * n + "true" + ")" * n


def plus_chain(n: int) -> str:  # n operands: n - 1 nested `+` and the `>`
    return " + ".join(["1"] * n) + " > 0"


def lists(n: int) -> str:  # each level a list literal and a member call (list types stay shallow)
    return "[" * n + "1" + "].size()" * n + " == 1"


def calls(n: int) -> str:
    return "'a'" + ".lowerAscii()" * n + " == 'a'"


def selections(n: int) -> str:
    return "device.attributes['gpu.nvidia.com'].index" + ".x" * (n - 1) + " == 1"


def global_calls(n: int) -> str:
    return "int(" * n + "1" + ")" * n + " == 1"


def ternaries(n: int) -> str:
    return "true ? true : " * n + "false"


def indexes(n: int) -> str:
    return "[[1]]" + "[0]" * n + " == 1"


def bound_all(n: int) -> str:  # every level reads the macro's variable
    return "[1].all(x, " + "(x > 0 && " * n + "true" + ")" * n + ")"


def bound_map(n: int) -> str:
    return "[1].map(x, " + "(x + " * n + "1" + ")" * n + ").size() == 1"


def bound_bind(n: int) -> str:
    return "cel.bind(v, 1, " + "(v > 0 && " * n + "true" + ")" * n + ")"


def bound_two(n: int) -> str:
    return "{'a': 1}.all(k, v, " + "(v > 0 && " * n + "k != ''" + ")" * n + ")"


def bound_wrong(n: int) -> str:  # the innermost comparison has no overload
    return "[1].all(x, " + "(x > 0 && " * n + "x == 'a'" + ")" * n + ")"


def nested_lists(n: int) -> str:  # list(list(...(int))): n levels of type
    return "size(" + "[" * n + "1" + "]" * n + ") == 1"


def nested_maps(n: int) -> str:
    return "size(" + "{'a': " * n + "1" + "}" * n + ") == 1"


# (builder, largest n cel-go accepts, its message one past it)
BOUNDARIES = [
    (parens, 249, LISTENER),
    (parens_around_index, 248, LISTENER),
    (nested_and, 249, LISTENER),
    (plus_chain, 250, VISITOR),
    (lists, 249, LISTENER),
    (calls, 249, VISITOR),
    (selections, 247, VISITOR),
    (global_calls, 249, LISTENER),
    (ternaries, 249, LISTENER),
    (indexes, 249, VISITOR),
    # measured on the real 1.37.2 API server (test_nesting_real.py)
    (bound_all, 247, LISTENER),
    (bound_map, 124, LISTENER),
    (bound_bind, 247, LISTENER),
    (bound_two, 247, LISTENER),
    (nested_lists, 248, LISTENER),
    (nested_maps, 248, LISTENER),
]


@pytest.mark.parametrize(("build", "limit", "message"), BOUNDARIES, ids=[b[0].__name__ for b in BOUNDARIES])
def test_cel_go_limit_of_each_construct(build, limit: int, message: str) -> None:  # type: ignore[no-untyped-def]
    assert cel_go_depth_error(build(limit)) is None
    assert f"compilation failed: {cel_go_depth_error(build(limit + 1))}" == message
    past = check(build(limit + 1), "1.34")
    assert (past.verdict, past.error) == ("Invalid", message)


@pytest.mark.parametrize("build", [parens, nested_and, plus_chain, lists, calls, global_calls, ternaries, bound_all,
                                   bound_two, nested_maps])
def test_at_the_limit_compiles(build) -> None:  # type: ignore[no-untyped-def]
    limit = next(b[1] for b in BOUNDARIES if b[0] is build)
    result = check(build(limit), "1.34")
    assert result.verdict == "OK", result.error


def test_deep_selections_type_check() -> None:
    # an attribute value is `any`: selecting from it is `dyn`, and so on down the chain
    assert check(selections(247), "1.34").verdict == "OK"
    wrong = check("device.driver" + ".x" * 60 + " == 1", "1.34")  # a string has no fields: at `.x`
    assert wrong.verdict == "Invalid" and (wrong.error or "").startswith("compilation failed: ERROR: <input>:1:14: ")


def test_deep_expression_keeps_cost_and_evaluates() -> None:
    deep = nested_and(40)[:-40] + " && " + INDEX + ")" * 40
    result = check(deep, "1.34")
    assert (result.verdict, result.cost) == ("OK", check(INDEX, "1.34").cost)
    assert evaluate(deep, GPU, "1.34") is True
    assert check(plus_chain(60), "1.34").cost == 60  # 59 additions and one comparison


def test_evaluating_past_cel_cpp_protobuf_depth_is_a_named_run_time_error() -> None:
    with pytest.raises(CelRuntimeError, match="protobuf depth limit"):
        evaluate(plus_chain(120), GPU, "1.34")


def test_error_deep_inside_keeps_its_column_and_source_line() -> None:
    expression = "(device.driver == 'x' || " * 40 + "device.driver == 1" + ")" * 40
    error = check(expression, "1.34").error or ""
    column = 25 * 40 + len("device.driver ") + 1
    assert error.startswith(f"compilation failed: ERROR: <input>:1:{column}: found no matching overload for '_==_'")
    assert f" | {expression}\n" in error


def test_multiline_deep_error_line() -> None:
    expression = "(true &&\n" * 40 + "1 + 'a' == 2" + ")" * 40
    error = check(expression, "1.34").error or ""
    assert error.startswith("compilation failed: ERROR: <input>:41:3: found no matching overload for '_+_'"), error
    assert "\n | 1 + 'a' == 2" + ")" * 40 + "\n" in error


SPLICED = [
    ("(device.attributes['gpu.nvidia.com'].index + 1 > 2 || "
     "[1, 2].map(x, x * 2).exists(y, y == 4) && 'ab'.startsWith('a') && ") * 3 + "true" + ")" * 3,
    # deep parts that read variables bound around them: declared with the binder's types
    "[1, 2].all(x, " + "(x > 0 && " * 3 + "cel.bind(v, [x, 'a'], " + "(v.size() > x && " * 3
    + "{'k': [x]}.exists(k, l, (k != '' && (l[0] == x && (x in l && v[1] == 'a'))))" + ")" * 3 + ")" + ")" * 3 + ")",
]


@pytest.mark.parametrize("expression", SPLICED, ids=["free", "bound"])
def test_splice_equals_one_compile(monkeypatch: pytest.MonkeyPatch, expression: str) -> None:
    """Pieces spliced back are the AST cel-cpp builds whole: same node types, references, positions."""
    key = env_key(Target.parse("1.34"))
    whole = decode_checked(check_env(key).compile(expression).serialize())
    monkeypatch.setattr(_deep, "PIECE_HEIGHT", 4)
    tree = parse(expression)
    assert tree is not None
    pieces = _deep._cut(tree, expression)
    assert pieces is not None
    assert any(piece.reads for piece in pieces) == ("all(x" in expression)  # pieces that read `x`, `v`, `k`, `l`

    def compile_text(env, text):  # type: ignore[no-untyped-def]
        return env.compile(text), None

    result = _deep.compile_deep(expression, lambda extra: check_env_with(key, _deep.declarations(extra)),
                                compile_text)
    assert result is not None and result[0] is not None
    spliced = decode_checked(result[0])

    def shape(checked):  # type: ignore[no-untyped-def]
        by_position = {}
        for node_id, position in checked.source_info.positions.items():
            ref = checked.reference_map.get(node_id)
            by_position.setdefault(position, []).append((
                str(checked.type_map[node_id]) if node_id in checked.type_map else None,
                (ref.name, tuple(ref.overload_id)) if ref is not None else None))
        return sorted((k, sorted(v, key=str)) for k, v in by_position.items())

    assert shape(spliced) == shape(whole)
    assert len(spliced.type_map) == len(whole.type_map)
    assert len(spliced.reference_map) == len(whole.reference_map)


@pytest.mark.parametrize("build", [bound_all, bound_map, bound_bind, bound_two, nested_lists, nested_maps])
def test_deep_past_cel_cpp_keeps_the_cost_of_a_whole_compile(build) -> None:  # type: ignore[no-untyped-def]
    """Below cel-cpp's 32 the engine compiles whole; past it the pieces cost the same per level."""
    low, high = (check(build(n), "1.34") for n in (20, 29))
    assert low.cost is not None and high.cost is not None
    step, rest = divmod(high.cost - low.cost, 9)
    assert rest == 0
    for n in (33, 40, 120):
        deep = check(build(n), "1.34")
        assert (deep.verdict, deep.cost) == ("OK", high.cost + step * (n - 29)), (n, deep.error)


def test_deep_bound_variables_evaluate_and_keep_errors() -> None:
    assert evaluate(bound_all(40), GPU, "1.34") is True
    assert evaluate(bound_two(40), GPU, "1.34") is True
    assert evaluate(nested_lists(40), GPU, "1.34") is True
    error = check(bound_wrong(40), "1.34").error or ""
    assert error.startswith(f"compilation failed: ERROR: <input>:1:{11 + 10 * 40 + 3}: found no matching overload"
                            " for '_==_' applied to '(int, string)'"), error[:300]


def test_a_binder_of_another_shape_is_not_cut_through() -> None:
    deep = "cel.block([1], " + "(cel.index(0) > 0 && " * 40 + "true" + ")" * 40 + ")"  # no cel.block here
    assert check(deep, "1.34").verdict == "Invalid"


def test_compiled_selector_of_a_deep_expression() -> None:
    compiled = compile_selector(nested_and(60), "1.34")
    assert not isinstance(compiled, type(check("true"))) and compiled.cost == check(nested_and(60), "1.34").cost


def test_collapse_keeps_calls_strings_and_offsets() -> None:
    text = "f((x)) && ((('((')) ) || x in ((y))"
    collapsed = collapse_redundant_parens(text)
    assert len(collapsed) == len(text)
    assert collapsed == "f((x)) &&   ('((')    || x in  (y) "


@pytest.mark.parametrize("expression", [
    "device.attributes['gpu.nvidia.com'].productName.matches(r'^H\\d+') && !(device.driver in ['a', \"b\"])",
    "'''multi\nline''' != \"\"\"x\"\"\" && b'\\x00' != b'' && rb'\\d' != b''",
    "-1 < 2u && 0x1F == 31 && 1.5e3 > .5 && -x.y == 1 && --1 == 1",
    "{'a': 1, 'b': [1, 2,],}.exists(k, v, v > 0) ? true : false",
    "google.protobuf.Int64Value{value: 1} == 1 && .device.driver == ''",
    "device.attributes.?x.orValue({}).size() == 0 && [?optional.none()].size() == 0 && m[?'k'].hasValue()",
    "cel.bind(d, device, d.driver == 'x') // a comment\n|| has(device.attributes.x)",
])
def test_depth_model_parses_the_grammar(expression: str) -> None:
    assert parse(expression) is not None
    assert cel_go_depth_error(expression) is None


@pytest.mark.parametrize("text", ["(", "a +", "'unterminated", "1 ? 2", "a.(b)", "[1, 2", "{1: }", "`x`y`"])
def test_depth_model_leaves_syntax_errors_to_the_engine(text: str) -> None:
    assert parse(text) is None and cel_go_depth_error(text) is None


def test_deep_two_variable_exists_one() -> None:
    deep = "{'a': 1}.exists_one(k, v, v > 0) && " + nested_and(40)
    assert check(deep, "1.34").verdict == "OK"
    assert check(deep, "1.32").verdict == "Invalid"  # two-variable comprehensions: from 1.33


def test_errors_in_several_pieces_are_all_reported_in_order() -> None:
    first = "(device.driver == 1 && " * 20
    second = "(1 + 'a' == 2 && " * 20
    expression = first + second + "true" + ")" * 40
    error = check(expression, "1.34").error or ""
    columns = [int(c) for c in re.findall(r"ERROR: <input>:1:(\d+): found no matching overload", error)]
    assert len(columns) == 40 and columns == sorted(columns), error[:500]


def test_deep_literals_past_the_type_nesting_limit_still_compare() -> None:
    """Placeholders deeper than cel-cpp's type nesting of 13 are opaque types, not ``dyn``."""
    equal = "[" * 40 + "1" + "]" * 40 + " == " + "[" * 40 + "1" + "]" * 40
    assert check(equal, "1.34").verdict == "OK"
    unequal = "{'a': " * 30 + "1" + "}" * 30 + " == " + "{'a': " * 30 + "'b'" + "}" * 30
    error = check(unequal, "1.34").error or ""
    inner = "map(string, " * 30 + "{}" + ")" * 30
    assert f"applied to '({inner.format('int')}, {inner.format('string')})'" in error, error[:400]


def deep_list(n: int) -> str:
    return "[" * n + "1" + "]" * n


def deep_map(n: int, value: str = "1") -> str:
    return "{'a': " * n + value + "}" * n


def indexed_lists(n: int) -> str:  # an index n levels into a literal n levels deep
    return deep_list(n) + "[0]" * n + " == 1"


def indexed_maps(n: int) -> str:
    return deep_map(n) + "['a']" * n + " == 1"


_NO_OVERLOAD = "compilation failed: ERROR: <input>:1:{}: found no matching overload for '{}' applied to '({}, {})'"
_COST = "too complex, exceeds cost limit"
# Indexes, calls, macros and comparisons reaching more than 12 levels into a literal, in an expression past
# cel-cpp's 32 levels: (name, expression, verdict, start of the error), the verdicts and messages of the real
# 1.37.2 API server (test_nesting_real.py posts each).
REACHING = [
    ("index 30 into 30", indexed_lists(30), "OK", ""),
    ("index 120 into 120", indexed_lists(120), "OK", ""),
    ("size 29 down", deep_list(30) + "[0]" * 29 + ".size() == 1", "OK", ""),
    ("size 15 down", deep_list(30) + "[0]" * 15 + ".size() == 1", "OK", ""),
    ("constant index out of range", deep_list(30) + "[0]" * 29 + "[1] == 1", "OK", ""),  # a run-time error
    ("map index 30", indexed_maps(30), "OK", ""),
    ("map select 30", deep_map(30) + ".a" * 30 + " == 1", "OK", ""),
    ("missing map key", deep_map(30) + "['a']" * 29 + "['b'] == 1", "OK", ""),  # a run-time error
    ("in", deep_list(40) + " in " + deep_list(41), "OK", ""),
    ("equal to a spelled-out literal", deep_list(40) + "[0]" * 26 + " == " + deep_list(14), "OK", ""),
    ("string index", deep_list(30) + "[0]" * 29 + "['a'] == 1", "Invalid",
     _NO_OVERLOAD.format(149, "_[_]", "list(int)", "string")),
    ("int == string", indexed_lists(30)[:-1] + "'a'", "Invalid", _NO_OVERLOAD.format(153, "_==_", "int", "string")),
    ("unequal to a spelled-out literal", deep_list(40) + "[0]" * 26 + " == " + deep_list(13), "Invalid",
     _NO_OVERLOAD.format(161, "_==_", "list(" * 14 + "int" + ")" * 14, "list(" * 13 + "int" + ")" * 13)),
    ("in of another depth", deep_list(40) + " in " + deep_list(40), "Invalid",
     _NO_OVERLOAD.format(83, "@in", "list(" * 40 + "int" + ")" * 40, "list(" * 40 + "int" + ")" * 40)),
    ("?: of equal types", "(true ? " + deep_list(40) + "[0]" * 26 + " : " + deep_list(14) + ").size() == 1", "OK", ""),
    ("?: of unequal types", "(true ? " + deep_list(40) + "[0]" * 26 + " : " + deep_list(13) + ").size() == 1",
     "Invalid", "compilation failed: ERROR: <input>:1:7: found no matching overload for '_?_:_' applied to '(bool, "
     + "list(" * 14 + "int" + ")" * 14 + ", " + "list(" * 13 + "int" + ")" * 13 + ")'"),
    ("list of equal types", "[" + deep_list(40) + "[0]" * 26 + ", " + deep_list(14) + "].size() == 2", "OK", ""),
    ("list of unequal types", "[" + deep_list(40) + "[0]" * 26 + ", " + deep_list(13) + "].size() == 2", "Invalid",
     "compilation failed: ERROR: <input>:1:163: expected type '" + "list(" * 14 + "int" + ")" * 14 + "' but found '"),
    ("all over a deep part", deep_list(30) + "[0]" * 10 + ".all(x, x" + "[0]" * 19 + " == 1)", "Forbidden", _COST),
    ("exists over a deep map", deep_map(30) + "['a']" * 14 + ".exists(k, k == 'a')", "Forbidden", _COST),
]


@pytest.mark.parametrize(("expression", "verdict", "error"), [r[1:] for r in REACHING], ids=[r[0] for r in REACHING])
def test_reaching_into_deep_literals(expression: str, verdict: str, error: str) -> None:
    """Placeholders show 12 levels of their type; pieces reaching further are cut lower (``_deep``)."""
    result = check(expression, "1.34")
    assert result.verdict == verdict, result.error
    assert (result.error or "").startswith(error), (result.error or "")[:400]


def test_index_chains_keep_the_cost_of_a_whole_compile() -> None:
    for build in (indexed_lists, indexed_maps):
        low, high = (check(build(n), "1.34") for n in (6, 14))  # compiled whole by cel-cpp
        assert low.cost is not None and high.cost is not None
        step, rest = divmod(high.cost - low.cost, 8)
        assert rest == 0
        for n in (30, 60):
            deep = check(build(n), "1.34")
            assert (deep.verdict, deep.cost) == ("OK", high.cost + step * (n - 14)), (n, deep.error)


def test_index_chains_past_cel_cpp_evaluate() -> None:
    """41 levels, compiled in pieces: the spliced tree evaluates; a constant index out of range fails at run time."""
    assert evaluate(indexed_lists(20), GPU, "1.34") is True
    assert evaluate(indexed_lists(20)[:-1] + "2", GPU, "1.34") is False
    with pytest.raises(CelRuntimeError, match="index"):
        evaluate(deep_list(20) + "[0]" * 19 + "[1] == 1", GPU, "1.34")
