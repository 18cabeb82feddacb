"""Consumable capacity (KEP-5075): what a request consumes of a shared device's capacity.

A port of the scheduler's rules in ``k8s.io/dynamic-resource-allocation/structured/internal/
incubating/consumable_capacity.go``: ``calculateConsumedQuantity`` (no request: the policy's
``default``, else the whole capacity; no policy: as asked; ``validRange`` with ``min``:
``roundUpRange``; ``validValues``: ``roundUpValidValues``) and ``violatesPolicy`` (a rounded
amount above ``validRange.max``, off the ``step`` grid or outside ``validValues`` makes the
device unable to serve the request). Step rounding uses the integer path (``Quantity.Value()``,
rounded up away from zero), which is what the scheduler does unless the 1.37 beta gate
DRAFractionalCapacityRange (off by default) is on; its milli-value path is not modelled.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dra_constructs.errors import DraConstructsError

__all__ = [
    "NotRepresentable",
    "RequestPolicy",
    "consumed_amount",
    "device_capacities",
    "format_quantity",
    "resolve_requests",
    "violates_policy",
]

_INT64_MAX = 2**63 - 1


class NotRepresentable(Exception):
    """``errCapacityRequestNotRepresentable`` / ``errNegativeCapacity``: aborts the allocation."""


@dataclass(frozen=True)
class RequestPolicy:
    """``CapacityRequestPolicy``: ``default``, ``validValues`` or ``validRange{min, max, step}``."""

    default: Fraction | None = None
    valid_values: tuple[Fraction, ...] | None = None
    has_range: bool = False
    min: Fraction | None = None
    max: Fraction | None = None
    step: Fraction | None = None

    @classmethod
    def parse(cls, raw: Mapping[str, Any], where: str, field_name: str) -> RequestPolicy:
        """The policy of one capacity; malformed quantities are input errors."""
        from dra_constructs.fit.model import quantity

        def q(value: Any, name: str) -> Fraction | None:
            return None if value is None else Fraction(quantity(str(value), where, f"{field_name}.{name}"))

        values = raw.get("validValues")
        valid_values = None if values is None else tuple(
            Fraction(quantity(str(v), where, f"{field_name}.validValues[{i}]"))
            for i, v in enumerate(values if isinstance(values, list) else []))
        span = raw.get("validRange")
        span = span if isinstance(span, dict) else None
        policy = cls(q(raw.get("default"), "default"), valid_values, span is not None,
                     *((q(span.get("min"), "validRange.min"), q(span.get("max"), "validRange.max"),
                        q(span.get("step"), "validRange.step")) if span is not None else (None, None, None)))
        if policy.has_range and policy.min is None:
            raise DraConstructsError(where, f"{field_name}.validRange.min", None, "required when validRange is set",
                                     "publish the smallest amount a request may consume")
        if policy.step is not None and policy.step <= 0:
            raise DraConstructsError(where, f"{field_name}.validRange.step", str(policy.step), "must be positive",
                                     "publish a step greater than zero")
        return policy


def _value(amount: Fraction) -> int:
    """``Quantity.Value()``: the integer value, rounded up away from zero."""
    return math.ceil(amount) if amount >= 0 else math.floor(amount)


def _go_rem(a: int, b: int) -> int:
    """Go's ``%`` (truncated: the sign of the dividend)."""
    rem = abs(a) % abs(b)
    return -rem if a < 0 else rem


def consumed_amount(requested: Fraction | None, total: Fraction, policy: RequestPolicy | None) -> Fraction:
    """``calculateConsumedQuantity``: the amount recorded in ``consumedCapacity``."""
    if requested is None:  # fillEmptyRequestQuantity
        amount = policy.default if policy is not None and policy.default is not None else total
    elif policy is None:
        amount = requested
    elif policy.has_range and policy.min is not None:
        amount = _round_up_range(requested, policy)
    elif policy.valid_values is not None:
        # roundUpValidValues: the first (values are sorted) valid value >= the request, else as asked
        amount = next((v for v in policy.valid_values if requested <= v), requested)
    else:
        amount = requested
    if amount < 0:
        raise NotRepresentable(f"consumed capacity {amount} is negative")
    return amount


def _round_up_range(requested: Fraction, policy: RequestPolicy) -> Fraction:
    """``roundUpRange`` (integer path): below min -> min; min + k*step, the smallest k reaching the request."""
    assert policy.min is not None
    if requested < policy.min:
        return policy.min
    if policy.step is None:
        return requested
    if requested > _INT64_MAX:
        raise NotRepresentable(f"request {requested} exceeds MaxInt64")
    requested_int, step, minimum = _value(requested), _value(policy.step), _value(policy.min)
    added = requested_int - minimum
    n = added // step + (1 if added % step else 0)  # added >= 0 here: floor division is Go's
    if minimum >= 0 and n > (_INT64_MAX - minimum) // step:
        raise NotRepresentable(f"rounding request {requested} up to the next step passes MaxInt64")
    return Fraction(minimum + step * n)


def violates_policy(amount: Fraction, policy: RequestPolicy | None) -> bool:
    """``violatesPolicy``: the default always passes; then ``validRange`` (max, step grid) or ``validValues``."""
    if policy is None:
        return False
    if policy.default is not None and amount == policy.default:
        return False
    if policy.has_range:
        if policy.max is not None and amount > policy.max:
            return True
        if policy.step is not None:
            assert policy.min is not None
            return _go_rem(_value(amount) - _value(policy.min), _value(policy.step)) != 0
        return False
    if policy.valid_values:
        return amount not in policy.valid_values
    return False


_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def format_quantity(amount: Fraction) -> str:
    """A quantity string for an exact amount: ``"16Gi"``, ``"3"``, ``"1500m"`` (milli rounded up)."""
    if amount.denominator == 1:
        whole = amount.numerator
        for suffix, unit in _BINARY:
            if whole and whole % unit == 0:
                return f"{whole // unit}{suffix}"
        return str(whole)
    return f"{math.ceil(amount * 1000)}m"


def device_capacities(capacity: Mapping[str, Fraction], driver: str) -> dict[str, Fraction]:
    """``resolveDeviceCapacity``: each capacity once; ``<driver>/x`` wins over a plain ``x``."""
    prefix = driver + "/"
    return {name: value for name, value in capacity.items() if prefix + name not in capacity}


def resolve_requests(requests: Mapping[str, Fraction] | tuple[tuple[str, Fraction], ...],
                     capacity: Mapping[str, Fraction], driver: str) -> dict[str, Fraction] | None:
    """``resolveCapacityRequests``: the requests keyed by the device's capacity names.

    ``None`` when the device lacks one (the device is skipped); a capacity asked for both as
    ``x`` and as ``<driver>/x`` aborts (:class:`NotRepresentable`, as upstream's fatal error).
    """
    resolved: dict[str, Fraction] = {}
    names: dict[str, str] = {}
    for name, amount in (requests.items() if isinstance(requests, Mapping) else requests):
        key = _resolve_name(name, capacity, driver)
        if key is None:
            return None
        if key in resolved:
            raise NotRepresentable(f"capacity {key.rpartition('/')[2]!r} requested both as {names[key]!r} "
                                   f"and as {name!r}")
        resolved[key], names[key] = amount, name
    return resolved


def _resolve_name(name: str, capacity: Mapping[str, Fraction], driver: str) -> str | None:
    """``resolveCapacityName``: exact, else ``<driver>/x`` <-> ``x`` (the driver's domain only)."""
    domain, slash, identifier = name.partition("/")
    if slash:
        exact = name if name in capacity else None
        return exact or (identifier if domain == driver and identifier in capacity else None)
    qualified = f"{driver}/{name}"
    if qualified in capacity:  # the qualified entry is the one counted (device_capacities)
        return qualified
    return name if name in capacity else None
