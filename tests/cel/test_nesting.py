"""Nesting: cel-cpp stops at depth 32, cel-go at 250; redundant parentheses are collapsed."""

from __future__ import annotations

import pytest

from dra_constructs.cel import Device, check, evaluate
from dra_constructs.cel._nesting import collapse_redundant_parens

INDEX = "device.attributes['gpu.nvidia.com'].index == 3"
GPU = Device("gpu.nvidia.com", "p", "d", {"index": {"int": 3}}, {})


@pytest.mark.parametrize("depth", [33, 50, 249])
def test_redundant_parentheses_up_to_cel_go_limit(depth: int) -> None:
    expression = "(" * depth + INDEX + ")" * depth
    result = check(expression, "1.34")
    assert (result.verdict, result.cost) == ("OK", check(INDEX, "1.34").cost)
    assert evaluate(expression, GPU, "1.34") is True


def test_past_cel_go_limit_is_invalid() -> None:
    assert check("(" * 250 + INDEX + ")" * 250, "1.34").verdict == "Invalid"


def test_error_inside_deep_parentheses_keeps_its_column_and_source_line() -> None:
    expression = "(" * 40 + "device.driver == 1" + ")" * 40
    error = check(expression, "1.34").error or ""
    assert error.startswith("compilation failed: ERROR: <input>:1:55: found no matching overload for '_==_'")
    assert f" | {expression}\n" in error


def test_collapse_keeps_calls_strings_and_offsets() -> None:
    text = "f((x)) && ((('((')) ) || x in ((y))"
    collapsed = collapse_redundant_parens(text)
    assert len(collapsed) == len(text)
    assert collapsed == "f((x)) &&   ('((')    || x in  (y) "


@pytest.mark.parametrize("expression", [
    " + ".join(["1"] * 32) + " > 0",  # a left-nested chain: not redundant, still cel-cpp's limit
    "(true && " * 34 + "true" + ")" * 34,
])
def test_non_redundant_nesting_beyond_32_is_a_documented_gap(expression: str) -> None:
    result = check(expression, "1.34")
    assert result.verdict == "Invalid" and "recursion" in (result.error or "")
