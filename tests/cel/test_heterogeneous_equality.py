"""Equality across types as cel-go evaluates it (issue 24, item 10).

cel-go v0.22-v0.27 (the versions of Kubernetes 1.32-1.37):

* ``==`` is ``types.Equal(l, r)`` (common/types/util.go), i.e. ``l.Equal(r)``. The built-in
  types answer ``False`` for another type (``Int.Equal`` compares int/uint/double numerically,
  ``String.Equal`` is ``Bool(ok && s == other)``), but the Kubernetes ones (apiserver
  pkg/cel/quantity.go, semver.go, url.go, ip.go, cidr.go) answer
  ``types.MaybeNoSuchOverloadErr(other)``: ``Semver == 'x'`` is an error, ``'x' == Semver``
  is false.
* ``!=`` is ``evalNe`` (interpreter/interpretable.go): ``types.Bool(types.Equal(l, r) !=
  types.True)``: an erroring equality makes ``!=`` *true*, never an error.
* ``in`` on a list is ``baseList.Contains`` (common/types/list.go): errors are skipped; the
  Kubernetes ``indexOf``/``lastIndexOf`` (apiserver pkg/cel/library/lists.go) test
  ``Get(i).Equal(item) == types.True``: errors are skipped too.
* ``sets.contains``/``equivalent``/``intersects`` (ext/sets.go) use ``baseList.Contains``, and
  ``distinct()`` (ext/lists.go, 1.35+) ``val.Equal(other) == types.True``: equal Quantities
  written differently are equal there, unlike a comparison of their protobuf carriers.
* ordering operators compare int, uint and double across types (``CrossTypeNumericComparisons``
  in the Kubernetes base environment); an int against a string is "no such overload".
"""

from __future__ import annotations

import pytest

from dra_constructs.cel import CelRuntimeError, Device, evaluate
from dra_constructs.errors import DraConstructsError

GPU = Device(
    driver="gpu.nvidia.com", pool="node-a", name="gpu-0",
    attributes={"architecture": {"string": "Hopper"}, "index": {"int": 0}, "mig": {"bool": False},
                "driverVersion": {"version": "580.65.6"}},
    capacity={"memory": "80Gi"},
)
ATTR = "device.attributes['gpu.nvidia.com']"
VERSIONS = ["1.32", "1.34", "1.37"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("expression", "expected"), [
    # the case: every attribute (string, int, bool and a version) differs from 'Ampere'
    (f"{ATTR}.all(k, {ATTR}[k] != 'Ampere')", True),
    (f"{ATTR}.all(k, v, v != 'Ampere')", True),  # two-variable all (1.33+ server; 1.32 below)
    (f"{ATTR}.driverVersion != 'Ampere'", True),  # Semver.Equal(string) errs -> != is true
    (f"{ATTR}.driverVersion != 1", True),
    (f"'Ampere' != {ATTR}.driverVersion", True),  # String.Equal(Semver) is false
    (f"{ATTR}.driverVersion != semver('580.65.6')", False),
    (f"{ATTR}.index != 'Ampere'", True),  # Int.Equal(string) is false
    (f"{ATTR}.index == 0u", True),  # numbers compare across int/uint/double
    (f"{ATTR}.index == 0.0", True),
    (f"{ATTR}.index < 0.5", True),
    (f"{ATTR}.index >= 1u", False),
    (f"{ATTR}.mig == 0", False),  # Bool.Equal(int) is false, not an error
    (f"{ATTR}.exists(k, {ATTR}[k] == 'Hopper')", True),  # the error on driverVersion is absorbed
    (f"[{ATTR}.driverVersion, {ATTR}.architecture].indexOf('Hopper') == 1", True),
    (f"[{ATTR}.architecture, {ATTR}.driverVersion].lastIndexOf(semver('580.65.6')) == 1", True),
    (f"[{ATTR}.architecture, {ATTR}.driverVersion].lastIndexOf('Hopper') == 0", True),
    (f"'Hopper' in [{ATTR}.driverVersion, {ATTR}.architecture]", True),
    ("dyn(quantity('1')) != 1", True),
    ("1 != dyn(quantity('1'))", True),
])
def test_cross_type_equality(version: str, expression: str, expected: bool) -> None:
    if version == "1.32" and "all(k, v," in expression:  # two-variable comprehensions: 1.33+
        with pytest.raises(DraConstructsError, match="Invalid"):
            evaluate(expression, GPU, version)
        return
    assert evaluate(expression, GPU, version) is expected


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("expression", "message"), [
    (f"{ATTR}.driverVersion == 'Ampere'", "no such overload"),  # evalEq returns Equal's error
    # no element is true, so the error on driverVersion is the result
    (f"{ATTR}.exists(k, {ATTR}[k] == 'Ampere')", "no such overload"),
    ("dyn(quantity('1')) == 1", "no such overload"),
    (f"{ATTR}.index < 'a'", "no such overload"),
    (f"{ATTR}.architecture > 1", "no such overload"),
])
def test_cross_type_errors(version: str, expression: str, message: str) -> None:
    with pytest.raises(CelRuntimeError, match=message):
        evaluate(expression, GPU, version)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("expression", "expected"), [
    ("sets.contains([quantity('1')], [quantity('1000m')])", True),  # Quantity.Equal, not the text
    ("sets.equivalent([quantity('1'), quantity('2')], [quantity('2000m'), quantity('1000m')])", True),
    ("sets.intersects([quantity('1')], [quantity('1000m')])", True),
    (f"sets.contains([{ATTR}.driverVersion, {ATTR}.architecture], ['Hopper'])", True),  # the error is skipped
    (f"sets.equivalent([{ATTR}.driverVersion], ['580.65.6'])", False),
    (f"sets.intersects([{ATTR}.driverVersion], [{ATTR}.architecture])", False),
])
def test_sets_compare_as_cel_go(version: str, expression: str, expected: bool) -> None:
    assert evaluate(expression, GPU, version) is expected


@pytest.mark.parametrize("version", ["1.35", "1.37"])
def test_distinct_compares_as_cel_go(version: str) -> None:
    assert evaluate("[quantity('1'), quantity('1000m')].distinct().size() == 1", GPU, version)
    assert evaluate("[quantity('1'), quantity('2')].distinct().size() == 2", GPU, version)
    assert evaluate("['b', 'b', 'c', 'a', 'c'].distinct() == ['b', 'c', 'a']", GPU, version)
