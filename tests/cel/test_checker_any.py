"""Attribute values are `any` in cel-go, not `dyn`: what the API server rejects because of it."""

from __future__ import annotations

import pytest

from dra_constructs.cel import check

G = "device.attributes['gpu.nvidia.com']"
ALL_VERSIONS = ["1.32", "1.33", "1.34", "1.35", "1.36", "1.37"]


@pytest.mark.parametrize("version", ALL_VERSIONS)  # DRAListTypeAttributes (dyn values) is off by default
@pytest.mark.parametrize("expression", [
    f"{G}.productName.exists(c, c == 'H')",
    f"{G}.productName.all(c, c != '')",
    f"{G}.productName.map(c, c).size() > 0",
    f"{G}.productName.filter(c, true).size() > 0",
    f"{G}.productName.exists_one(c, true)",
    f"cel.bind(v, {G}.productName, v.exists(c, c == 'H'))",
    f"[{G}.productName].all(p, p.exists(c, true))",
    f"true ? {G}.productName.exists(c, true) : false",
    f"{G}[?'productName'].value().exists(c, true)",
])
def test_comprehension_over_an_attribute_value_is_invalid(version: str, expression: str) -> None:
    result = check(expression, version)
    assert result.verdict == "Invalid"
    assert "expression of type 'any' cannot be range of a comprehension (must be list, map, or dynamic)" in (
        result.error or "")


def test_range_error_position_is_the_range_expression() -> None:
    error = check(f"{G}.productName.exists(c, c == 'H')", "1.34").error or ""
    assert error.startswith("compilation failed: ERROR: <input>:1:36: expression of type 'any'")
    assert error.endswith(" | " + "." * 35 + "^")
    two = check(f"{G}.a.all(x, true) && {G}.b.all(y, true)", "1.34").error or ""
    assert two.count("cannot be range of a comprehension") == 2


@pytest.mark.parametrize("expression", [
    f"{G}.all(name, name != '')",  # a domain is a map(string, any): its keys are strings
    "device.attributes.exists(domain, domain == 'gpu.nvidia.com')",
    f"dyn({G}.productName).exists(c, true) || true",
    f"cel.bind(g, {G}, g.exists(k, k == 'productName'))",
    "cel.bind(d, device, d.attributes['gpu.nvidia.com'].exists(k, k == 'index'))",
    f"{G}.index == 1",
    f"{G}.mig",  # an attribute value as the result: cel.AnyType is accepted
    f"true ? {G}.mig : false",  # ?: takes its first branch's type
])
def test_what_cel_go_accepts(expression: str) -> None:
    assert check(expression, "1.34").verdict == "OK", check(expression, "1.34").error


def test_selecting_from_any_gives_a_dyn_range() -> None:
    result = check(f"{G}.productName.x.exists(c, true)", "1.34")  # checks; a dyn range has no size bound
    assert result.verdict == "Forbidden" and "exceeds cost limit" in (result.error or "")


def test_two_variable_comprehension_value_is_any() -> None:
    assert check(f"{G}.all(k, v, v == 1 || k == '')", "1.34").verdict == "OK"
    result = check(f"{G}.all(k, v, v.exists(c, true))", "1.34")
    assert result.verdict == "Invalid" and "type 'any' cannot be range" in (result.error or "")


@pytest.mark.parametrize(("expression", "message"), [
    ("dyn(true)", "must evaluate to bool or the unknown type, not dyn"),
    (f"{G}.productName.x", "must evaluate to bool or the unknown type, not dyn"),
    (f"false ? dyn(1) : {G}.mig", "must evaluate to bool or the unknown type, not dyn"),
])
def test_dyn_result_is_invalid(expression: str, message: str) -> None:
    assert check(expression, "1.34").error == message


def test_homogeneous_literal_messages_name_any() -> None:
    error = check(f"[{G}.index, dyn(1)].size() == 2", "1.34").error or ""
    assert "expected type 'any' but found 'dyn'" in error
    assert check(f"[{G}.index, {G}.productName].size() == 2", "1.34").verdict == "OK"


@pytest.mark.parametrize("version", ["1.35", "1.36", "1.37"])
def test_list_type_attribute_environment_is_off_by_default(version: str) -> None:
    # DRAListTypeAttributes: alpha (off) in 1.36 and 1.37; `includes()` exists only with the gate
    result = check(f"{G}.productName.includes('H')", version)
    assert result.verdict == "Invalid" and "undeclared reference to 'includes'" in (result.error or "")
    assert check(f"{G}.productName", version).verdict == "OK"  # `any` result accepted, `dyn` is not
    assert check(f"dyn({G}.productName)", version).error == "must evaluate to bool or the unknown type, not dyn"


@pytest.mark.parametrize(("version", "declared"), [("1.35", False), ("1.36", True), ("1.37", True)])
def test_allow_multiple_allocations_from_its_default_on_release(version: str, declared: bool) -> None:
    assert check("device.allowMultipleAllocations", version).ok is declared
