"""The DRA compiler's own test cases (k8s.io/dynamic-resource-allocation cel/compile_test.go,
v0.32.3 and v0.34.x), rewritten: verdicts and worst-case costs must be the API server's."""

from __future__ import annotations

import pytest

from dra_constructs.cel import check

MULTILINE = """
device.capacity["dra.example.com"].quantity.isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"].bool &&
device.attributes["dra.example.com"].int > 0 &&
device.attributes["dra.example.com"].string == "fish" &&
device.attributes["dra.example.com"].version.isGreaterThan(semver("0.0.1")) &&
device.capacity["dra.example.com"]["quantity"].isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"]["bool"] &&
device.attributes["dra.example.com"]["int"] > 0 &&
device.attributes["dra.example.com"]["string"] == "fish" &&
device.attributes["dra.example.com"]["version"].isGreaterThan(semver("0.0.1"))
"""
NESTED = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"
EXPENSIVE = (
    f"{NESTED}.all(x, {NESTED}.all(y, {NESTED}.all(z, {NESTED}.all(z2, {NESTED}.all(z3, "
    f"{NESTED}.all(z4, {NESTED}.all(z5, int('1'.find('[0-9]*')) < 100)))))))"
)

# (expression, expected worst-case cost) - identical at 1.32.3 and 1.34 upstream.
COSTS = [
    ('device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))', 6),
    ('device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))', 6),
    ('"no-such-domain" in device.attributes', 3),
    ('device.driver == ""', 2),
    ('device.driver == "dra.example.com"', 4),
    ('device.attributes["dra.example.com"].name', 4),
    ('device.attributes["dra.example.com"]["name"]', 4),
    ('cel.bind(dra, device.attributes["dra.example.com"], dra.name)', 15),
    ('device.attributes["dra.example.com"].name > 0', 5),
    ('device.attributes["dra.example.com"].name == "fish"', 5),
    ('device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))', 6),
    ('device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))', 6),
    ('"name" in device.capacity["dra.example.com"] && '
     'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))', 10),
    ('!("name" in device.capacity["dra.example.com"]) || '
     'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))', 11),
    (MULTILINE, 52),
    ('device.attributes["dra.example.com"].a && device.attributes["dra.example.com"].b && '
     'device.attributes["dra.example.com"].c', 12),
    ('device.attributes.exists_one(x, x == "dra.example.com")', 164),
    ('device.attributes["dra.example.com"].exists_one(x, x == "services")', 133),
    ('device.attributes["dra.example.com"].services.split("example").size() >= 2', 19),
    ('device.attributes["dra.example.com"].services.matches("[^a]?sym")', 18),
    ('device.capacity.exists_one(x, x == "dra.example.com")', 164),
    ('device.capacity["dra.example.com"].exists_one(x, x == "memory")', 133),
]


@pytest.mark.parametrize("version", ["1.32.3", "1.34"])
@pytest.mark.parametrize(("expression", "cost"), COSTS)
def test_upstream_costs(version: str, expression: str, cost: int) -> None:
    result = check(expression, version)
    assert result.verdict == "OK", result.error
    assert result.cost == cost


@pytest.mark.parametrize("version", ["1.32", "1.34"])
def test_upstream_compile_errors(version: str) -> None:
    assert "Syntax error" in (check("?!", version).error or "")
    assert check("1", version).error == "must evaluate to bool or the unknown type, not int"
    assert check("true", version).verdict == "OK"
    assert check("false", version).verdict == "OK"


@pytest.mark.parametrize("version", ["1.32", "1.34"])
def test_upstream_expensive_is_forbidden(version: str) -> None:
    result = check(EXPENSIVE, version)
    assert (result.verdict, result.cost) == ("Forbidden", 85555551)


def test_semver_normalization_only_from_1_34() -> None:
    expression = ('device.attributes["dra.example.com"].name.isGreaterThan(semver("v0.0.1", true)) '
                  '&& isSemver("v1.0.0", true)')
    assert check(expression, "1.34").cost == 7
    assert check(expression, "1.32").verdict == "Invalid"
    assert check(expression, "1.33").verdict == "Invalid"  # introduced in 1.33: new selectors from 1.34


def test_allow_multiple_allocations_follows_the_default_feature_gates() -> None:
    # DRAConsumableCapacity: alpha (off) in 1.34-1.35, beta (on) from 1.36; compile.go declares the
    # field only while the gate is on.
    expression = "device.allowMultipleAllocations == false"
    for version in ("1.32", "1.34", "1.35"):
        result = check(expression, version)
        assert result.verdict == "Invalid", version
        assert "undefined field 'allowMultipleAllocations'" in (result.error or "")
    assert check(expression, "1.36").cost == 3
    assert check(expression, "1.34", allow_multiple_allocations=True).cost == 3


@pytest.mark.parametrize("version", ["1.32", "1.37"])
def test_errors_print_sorted_by_line_and_column(version: str) -> None:
    # cel-cpp reports a member call's argument errors before its receiver's; cel-go sorts them
    # (the real 1.37.2 and 1.34.4 servers print these, test_block_real.py)
    error = check("cel.block([1], cel.index(0) > 0)", version).error or ""
    columns = [int(line.split(":")[3]) for line in error.splitlines() if "ERROR: <input>:" in line]
    assert columns == [1, 10, 16, 25]
    assert "undeclared reference to 'block'" in error and "undeclared reference to 'index'" in error
