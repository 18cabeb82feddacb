"""Kubernetes resource.Quantity and blang/semver rules behind quantity() and semver()."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dra_constructs.cel.quantity import QuantityError, parse_quantity
from dra_constructs.cel.semver import SemverError, normalize_and_parse, parse_semver


@pytest.mark.parametrize(("text", "value"), [
    ("0", 0), ("1", 1), ("1Ki", 1024), ("1.5Gi", Fraction(3, 2) * 2**30), ("500m", Fraction(1, 2)),
    ("1e3", 1000), ("1E3", 1000), ("1k", 1000), ("81559Mi", 81559 * 2**20), ("+2", 2), ("-2", -2),
    (".5", Fraction(1, 2)), ("1n", Fraction(1, 10**9)), ("1e-10", Fraction(1, 10**9)),  # rounds up to 1n
    ("1E", 10**18), ("12e-3", Fraction(12, 1000)),
])
def test_parse_values(text: str, value: Fraction | int) -> None:
    assert parse_quantity(text).value == value


@pytest.mark.parametrize("text", ["", "abc", "1Gb", "1.2.3", "1 Gi", "1ki", "--1", "1e", "1e3.5"])
def test_parse_errors(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_integer_representation_follows_kubernetes() -> None:
    assert parse_quantity("1Gi").as_int64() == 2**30
    assert parse_quantity("1k").as_int64() == 1000
    assert parse_quantity("1000m").as_int64() is None  # int64Amount{1000, -3}: not an integer in Go
    assert parse_quantity("1.5").as_int64() is None
    assert parse_quantity("500m").add(parse_quantity("500m")).as_int64() is None
    assert parse_quantity("1k").add(parse_quantity("1")).as_int64() == 1001
    assert parse_quantity("1e-10").as_int64() is None  # inf.Dec path


def test_compare_and_arithmetic() -> None:
    assert parse_quantity("80Gi").cmp(parse_quantity("79.65Gi")) == 1
    assert parse_quantity("1Gi").cmp(parse_quantity("1073741824")) == 0
    assert parse_quantity("1").sub(parse_quantity("2")).sign() == -1
    q = parse_quantity("1.5Gi")
    assert parse_quantity(q.encode().split("|")[0].split("/")[0]).value >= 0
    assert type(q).decode(q.encode()) == q


@pytest.mark.parametrize(("a", "b", "order"), [
    ("1.0.0", "1.0.1", -1), ("1.10.0", "1.9.0", 1), ("1.0.0-alpha", "1.0.0", -1),
    ("1.0.0-alpha.1", "1.0.0-alpha.beta", -1), ("1.0.0-2", "1.0.0-10", -1), ("1.0.0+build", "1.0.0", 0),
    ("9.0.0", "8.0.0", 1), ("1.0.0-rc.1", "1.0.0-rc.1.1", -1),
])
def test_semver_order(a: str, b: str, order: int) -> None:
    assert parse_semver(a).compare(parse_semver(b)) == order


@pytest.mark.parametrize("text", [
    "", "1", "1.0", "v1.0.0", "01.0.0", "1.0.00", "1.0.0-", "1.0.0-01", "1.0.0+", "a.b.c"])
def test_semver_errors(text: str) -> None:
    with pytest.raises(SemverError):
        parse_semver(text)


def test_semver_normalize() -> None:
    assert normalize_and_parse("v1.02") == parse_semver("1.2.0")
    assert normalize_and_parse("1") == parse_semver("1.0.0")
    with pytest.raises(SemverError):
        normalize_and_parse("1.0-rc1")
