"""Exact quantities (``"80384Mi"``, ``"1"``) as the allocator compares them, parsed once per text."""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

from dra_constructs.cel.quantity import QuantityError, parse_quantity
from dra_constructs.errors import DraConstructsError

__all__ = ["quantity"]


def quantity(text: str, where: str, field_name: str) -> Fraction:
    """The exact value of a quantity string (``"80384Mi"``, ``"1"``); whole values as ``int`` (faster)."""
    value = _quantity(str(text))
    if isinstance(value, str):
        raise DraConstructsError(where, field_name, text, f"not a Kubernetes quantity ({value})",
                                 'write a quantity such as "1", "14" or "80Gi"')
    return value


@lru_cache(maxsize=4096)
def _quantity(text: str) -> Fraction | str:
    """Parsed once per distinct text (counters repeat on every device); the error text if invalid."""
    try:
        value = parse_quantity(text).value
    except QuantityError as error:
        return str(error)
    return value.numerator if value.denominator == 1 else value  # type: ignore[return-value]
