"""Facts of shared/reference/dra-api.md section 5 and the API server's validation order."""

from __future__ import annotations

import pytest

from dra_constructs.cel import MAX_LENGTH, check
from dra_constructs.errors import DraConstructsError

MEMORY_GE = "device.capacity['gpu.nvidia.com'].memory >= quantity('40Gi')"
CC_GE = "device.attributes['gpu.nvidia.com'].cudaComputeCapability >= semver('8.0.0')"
LOWER_MATCHES = "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*h100.*$')"
SEMVER_EQ = "device.attributes['gpu.nvidia.com'].cudaComputeCapability == semver('9.0.0')"


@pytest.mark.parametrize("version", ["1.32", "1.32.0", "1.34", "1.36"])
def test_quantity_has_no_ordering_operator(version: str) -> None:
    result = check(MEMORY_GE, version)
    assert result.verdict == "Invalid"
    assert result.error == (
        "compilation failed: ERROR: <input>:1:42: found no matching overload for '_>=_' applied to "
        "'(kubernetes.Quantity, kubernetes.Quantity)'\n"
        " | device.capacity['gpu.nvidia.com'].memory >= quantity('40Gi')\n"
        " | .........................................^"
    )
    assert result.fix is not None
    assert "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0" in result.fix


def test_semver_has_no_ordering_operator() -> None:
    result = check(CC_GE, "1.34")
    assert result.verdict == "Invalid"
    assert "'_>=_' applied to '(dyn, kubernetes.Semver)'" in (result.error or "")
    assert result.fix is not None and "compareTo(semver('8.0.0')) >= 0" in result.fix


@pytest.mark.parametrize("working", [
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
    "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('40Gi'))",
    "device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('8.0.0')) >= 0",
    "device.attributes['gpu.nvidia.com'].cudaComputeCapability == '9.0.0'",  # compiles; fails at run time
    "'index' in device.attributes['gpu.nvidia.com'] && device.attributes['gpu.nvidia.com'].index == 0",
    "sign(device.capacity['gpu.nvidia.com'].memory) == 1",
])
def test_reference_working_forms_compile(working: str) -> None:
    assert check(working, "1.32").verdict == "OK"


def test_sign_is_global_not_member() -> None:
    assert check("device.capacity['gpu.nvidia.com'].memory.sign() == 1", "1.32").verdict == "Invalid"


def test_cost_estimator_bug_of_1_32_0_to_1_32_2() -> None:
    assert check(LOWER_MATCHES, "1.32.0").cost == 7378697629483821060
    assert check(LOWER_MATCHES, "1.32.0").verdict == "Forbidden"
    assert check(SEMVER_EQ, "1.32.2").cost == 1844674407370955269
    assert (check(LOWER_MATCHES, "1.32.3").verdict, check(LOWER_MATCHES, "1.32.3").cost) == ("OK", 32)
    assert check(SEMVER_EQ, "1.32.3").cost == 12
    assert check("device.driver == 'gpu.nvidia.com'", "1.32.0").verdict == "OK"


def test_order_too_long_before_invalid() -> None:
    invalid_and_long = "(" * (MAX_LENGTH + 1)
    assert check(invalid_and_long, "1.32").verdict == "TooLong"
    # the limit counts bytes, like Go's len(): 5,121 two-byte characters are too long
    assert check("'" + "é" * 5120 + "' == ''", "1.32").verdict == "TooLong"
    exactly = "true" + " " * (MAX_LENGTH - 4)
    assert check(exactly, "1.32").verdict == "OK"


def test_two_variable_comprehensions_from_1_33() -> None:
    expression = "device.attributes['gpu.nvidia.com'].all(k, v, k != '')"
    assert check(expression, "1.32").verdict == "Invalid"
    assert check(expression, "1.33").verdict == "OK"
    assert check("[1].exists_one(i, v, v == 1)", "1.34").verdict == "OK"


def test_type_errors_and_undeclared_names() -> None:
    assert "undefined field 'attrs'" in (check("device.attrs == 1", "1.32").error or "")
    assert "undeclared reference to 'devices'" in (check("devices.driver == 'x'", "1.32").error or "")
    assert check("device.capacity['x'].memory == '40Gi'", "1.32").verdict == "Invalid"
    assert check("device.driver", "1.32").error == "must evaluate to bool or the unknown type, not string"
    # compile.go accepts exactly cel.BoolType or cel.AnyType (an attribute value); dyn is neither
    assert check("dyn(device.driver)", "1.32").error == "must evaluate to bool or the unknown type, not dyn"
    assert check("device.attributes['gpu.nvidia.com'].mig", "1.32").verdict == "OK"


def test_kubernetes_validators() -> None:
    assert "expected type 'int' but found 'string'" in (check("[1, 'a'].size() > 0", "1.32").error or "")
    assert "invalid matches argument" in (check("device.driver.matches('[')", "1.32").error or "")
    assert "invalid duration argument" in (check("duration('1x') > duration('1s')", "1.32").error or "")
    assert check("1 < 1.5 && 2u > 1", "1.32").verdict == "OK"  # cross-type numeric comparisons


@pytest.mark.parametrize("expression", [
    "'a,b'.split(',').size() == 2", "sets.contains([1], [1])", "cel.bind(x, 1, x == 1)",
    "[3, 1].min() == 1 && [1, 2].sum() == 3 && [1].indexOf(1) == 0", "'abc'.find('b') == 'b'",
    "url('https://x.io/p').getHost() == 'x.io'", "cidr('10.0.0.0/8').containsIP(ip('10.1.2.3'))",
    "isQuantity('1Gi') && quantity('1Gi').asInteger() == 1073741824", "optional.of(1).hasValue()",
    "format.dns1123Label().validate('ok').hasValue()", "'%s'.format(['a']) == 'a'",
])
def test_kubernetes_libraries_are_declared(expression: str) -> None:
    assert check(expression, "1.32").verdict == "OK", check(expression, "1.32").error


def test_optional_library_v2_only_from_1_33() -> None:
    assert check("[1].first().hasValue()", "1.32").verdict == "Invalid"
    assert check("[1].first().hasValue()", "1.34").verdict == "OK"
    assert check("optional.unwrap([optional.of(1)]) == [1]", "1.34").verdict == "OK"


def test_member_call_on_dyn_compiles_when_any_overload_exists() -> None:
    # the authz library declares 'path' for Authorizer: a dyn receiver type-checks
    assert check("device.attributes['d'].x.path('a').check('get').allowed()", "1.32").verdict == "OK"
    assert check("device.attributes['d'].x.nope()", "1.32").verdict == "Invalid"


def test_cache_and_bad_input() -> None:
    first = check("device.driver == 'cache-probe'", "1.34")
    second = check("device.driver == 'cache-probe'", "1.34")
    assert (first.cached, second.cached, second.verdict) == (False, True, "OK")
    with pytest.raises(DraConstructsError):
        check(42, "1.32")  # type: ignore[arg-type]
    with pytest.raises(DraConstructsError):
        check("true", "1.31")


def test_equal_shapes_share_the_verdict_but_not_the_evaluation() -> None:
    from dra_constructs.cel import Device, evaluate

    first = check("device.attributes['gpu.nvidia.com'].productName == 'shape-one'", "1.32")
    second = check("device.attributes['gpu.nvidia.com'].productName == 'shape-two'", "1.32")
    assert (first.verdict, second.verdict, first.cost, second.cost) == ("OK", "OK", 5, 5)
    device = Device("gpu.nvidia.com", "p", "d", {"productName": {"string": "shape-two"}}, {})
    assert evaluate(second.expression, device, "1.32") is True
    assert evaluate(first.expression, device, "1.32") is False
    # contents that the API server validates are never shared
    assert check("device.driver.matches('a')", "1.32").verdict == "OK"
    assert check("device.driver.matches('[')", "1.32").verdict == "Invalid"
    # the byte limit is checked before any sharing
    assert check("'" + "a" * 5200 + "' == ''", "1.32").verdict == "OK"
    assert check("'" + "é" * 5200 + "' == ''", "1.32").verdict == "TooLong"
