"""cel-go folds constant type conversions when the program is built (OptOptimize): failures are Invalid."""

from __future__ import annotations

import pytest

from dra_constructs.cel import check


@pytest.mark.parametrize("version", ["1.32.3", "1.34", "1.37"])
@pytest.mark.parametrize(("expression", "error"), [
    ("int('abc') == 0", 'strconv.ParseInt: parsing "abc": invalid syntax'),
    ("int('9223372036854775808') == 0", 'strconv.ParseInt: parsing "9223372036854775808": value out of range'),
    ("uint('+1') == 1u", 'strconv.ParseUint: parsing "+1": invalid syntax'),
    ("uint(-1) == 1u", "unsigned integer overflow"),
    ("int(1e30) == 0", "integer overflow"),
    ("int(18446744073709551615u) == 0", "integer overflow"),
    ("double('x') > 0.0", 'strconv.ParseFloat: parsing "x": invalid syntax'),
    ("bool('maybe')", 'strconv.ParseBool: parsing "maybe": invalid syntax'),
    ("string(b'\\xff') == ''", "invalid UTF-8 in bytes, cannot convert to string"),
    ("int(dyn('x')) == 1", 'strconv.ParseInt: parsing "x": invalid syntax'),  # dyn(const) folds first
    ("device.attributes['gpu.nvidia.com'].index == int('one')", 'parsing "one"'),
    ("[1].all(x, x == int('q'))", 'parsing "q"'),
])
def test_failing_constant_conversion_is_invalid(version: str, expression: str, error: str) -> None:
    result = check(expression, version)
    assert result.verdict == "Invalid"
    assert result.error is not None and result.error.startswith("program instantiation failed: ")
    assert error in result.error


@pytest.mark.parametrize("expression", [
    "int('12') == 12", "int('-12') == -12", "uint('7') == 7u", "double('1e5') > 0.0", "double('Infinity') > 0.0",
    "double('0x1p-2') == 0.25", "bool('t') && !bool('False')", "int(string(12)) == 12", "int(2.9) == 2",
    "int(device.driver) == 1",  # not a constant: a run-time matter
])
def test_constant_conversions_that_succeed(expression: str) -> None:
    assert check(expression, "1.34").verdict == "OK", check(expression, "1.34").error


def test_folding_is_never_shared_between_equal_shapes() -> None:
    assert check("int('12') == 12", "1.34").verdict == "OK"
    assert check("int('ab') == 12", "1.34").verdict == "Invalid"  # same shape, different contents


def test_regex_literals_share_a_shape_only_when_valid() -> None:
    ok = check("device.driver.matches('^[a-z]+$') || device.driver.find('[0-9]') == '1'", "1.34")
    same = check("device.driver.matches('^[b-y]+$') || device.driver.find('[1-8]') == '2'", "1.34")
    bad = check("device.driver.matches('^[b-y+$)') || device.driver.find('[1-8]') == '2'", "1.34")
    assert ok.verdict == same.verdict == "OK" and same.cost == ok.cost
    assert bad.verdict == "Invalid"
