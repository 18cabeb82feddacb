"""Kubernetes ``resource.Quantity`` semantics for CEL's ``quantity()`` library.

Hand-written (no maintained Python package implements Kubernetes quantities): a port of the
parsing and arithmetic *rules* of ``k8s.io/apimachinery/pkg/api/resource`` (``quantity.go``,
``amount.go``, ``suffix.go``). Values are exact rationals. Like Kubernetes, a quantity keeps an
``int64Amount`` (value x 10^scale) representation when parsing or adding can stay in int64, and
only that representation answers ``isInteger()``/``asInteger()`` (so ``quantity('1000m')`` is
not an integer, exactly as in the API server).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

__all__ = ["Quantity", "QuantityError", "parse_quantity"]

_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)
_NANO = -9
_MAX_INT64_FACTORS = 18
_DIGITS = "0123456789"
_SUFFIX_CHARS = "eEinumkKMGTP"
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}

ERR_FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"


class QuantityError(ValueError):
    """A string that ``resource.ParseQuantity`` rejects; the message is Kubernetes' own."""


@dataclass(frozen=True)
class Quantity:
    """An exact quantity; ``amount`` is ``(value, scale)`` while Kubernetes keeps it in int64."""

    value: Fraction
    amount: tuple[int, int] | None = None

    def cmp(self, other: Quantity) -> int:
        """-1, 0 or 1 (``Quantity.Cmp``)."""
        return (self.value > other.value) - (self.value < other.value)

    def sign(self) -> int:
        return (self.value > 0) - (self.value < 0)

    def as_int64(self) -> int | None:
        """``Quantity.AsInt64``: only an int64 amount with scale >= 0 that fits."""
        if self.amount is None:
            return None
        value, scale = self.amount
        if scale == 0:
            return value
        if scale < 0:
            return None
        result = value * 10**scale
        return result if _INT64_MIN <= result <= _INT64_MAX else None

    def as_approximate_float(self) -> float:
        try:
            return float(self.value)
        except OverflowError:
            return math.inf if self.value > 0 else -math.inf

    def add(self, other: Quantity) -> Quantity:
        """``Quantity.Add`` (stays int64 when both are and nothing overflows)."""
        if self.amount is not None and other.amount is not None:
            summed = _int64_add(self.amount, other.amount)
            if summed is not None:
                return Quantity(self.value + other.value, summed)
        return Quantity(self.value + other.value, None)

    def sub(self, other: Quantity) -> Quantity:
        """``Quantity.Sub``."""
        negated = Quantity(-other.value, None if other.amount is None else (-other.amount[0], other.amount[1]))
        return self.add(negated)

    def encode(self) -> str:
        """Canonical text of this value and representation (for the runtime carrier)."""
        amount = "" if self.amount is None else f"{self.amount[0]}e{self.amount[1]}"
        return f"{self.value.numerator}/{self.value.denominator}|{amount}"

    @classmethod
    def decode(cls, text: str) -> Quantity:
        fraction, _, amount = text.partition("|")
        numerator, denominator = fraction.split("/")
        parsed_amount = None
        if amount:
            value, scale = amount.split("e")
            parsed_amount = (int(value), int(scale))
        return cls(Fraction(int(numerator), int(denominator)), parsed_amount)

    @classmethod
    def from_int(cls, value: int) -> Quantity:
        """``resource.NewQuantity(value, DecimalExponent)``."""
        return cls(Fraction(value), (value, 0))


def _int64_add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int] | None:
    """``int64Amount.Add``: ``None`` on overflow (Kubernetes then falls back to inf.Dec)."""
    (av, ascale), (bv, bscale) = a, b
    if bv == 0:
        return a
    if av == 0:
        return b
    if ascale == bscale:
        value, scale = av + bv, ascale
    elif ascale > bscale:
        shifted = av * 10 ** (ascale - bscale)
        if not _INT64_MIN <= shifted <= _INT64_MAX:
            return None
        value, scale = shifted + bv, bscale
    else:
        shifted = bv * 10 ** (bscale - ascale)
        if not _INT64_MIN <= shifted <= _INT64_MAX:
            return None
        value, scale = av + shifted, ascale
    return (value, scale) if _INT64_MIN <= value <= _INT64_MAX else None


def _split(text: str) -> tuple[bool, str, str, str, str]:
    """``parseQuantityString``: (positive, value, numerator, denominator, suffix)."""
    positive, pos, end = True, 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] != "-"
        pos += 1
    while True:  # strip leading zeros
        if pos >= end:
            return positive, "0", "0", "", ""
        if text[pos] != "0":
            break
        pos += 1
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos >= end:
        return positive, text, text[start:end], "", ""
    numerator = text[start:pos] or "0"
    denominator = ""
    if text[pos] == ".":
        pos += 1
        dstart = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        if pos >= end:
            return positive, text, numerator, text[dstart:end], ""
        denominator = text[dstart:pos]
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos >= end:
        return positive, value, numerator, denominator, text[suffix_start:]
    if text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos >= end:
        return positive, value, numerator, denominator, text[suffix_start:]
    raise QuantityError(ERR_FORMAT)


def _interpret(suffix: str) -> tuple[int, int, str] | None:
    """``suffixer.interpret``: (base, exponent, format)."""
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix], "DecimalSI"
    if suffix in _BINARY:
        return 2, _BINARY[suffix], "BinarySI"
    if len(suffix) > 1 and suffix[0] in "eE":
        try:
            exponent = int(suffix[1:], 10)
        except ValueError:
            return None
        if not _INT64_MIN <= exponent <= _INT64_MAX or not suffix[1:].lstrip("+-").isdigit():
            return None
        exponent = (exponent + (1 << 31)) % (1 << 32) - (1 << 31)  # Go's int32() conversion
        return 10, exponent, "DecimalExponent"
    return None


def _dec(value: str) -> Fraction:
    """``inf.Dec.SetString`` of the numeric part (sign, digits, optional fraction)."""
    body = value.lstrip("+-")
    if body in ("", ".") or body.count(".") > 1 or not body.replace(".", "").isdigit():
        raise QuantityError(ERR_NUMERIC)
    result = Fraction(body)
    return -result if value.startswith("-") else result


def parse_quantity(text: str) -> Quantity:
    """``resource.ParseQuantity``; raises :class:`QuantityError` with Kubernetes' message."""
    if not text:
        raise QuantityError(ERR_FORMAT)
    if text == "0":
        return Quantity(Fraction(0), (0, 0))
    positive, value, numerator, denominator, suffix = _split(text)
    interpreted = _interpret(suffix)
    if interpreted is None:
        raise QuantityError(ERR_SUFFIX)
    base, exponent, fmt = interpreted
    precision, scale, mantissa = 0, 0, 1
    if fmt in ("DecimalExponent", "DecimalSI"):
        scale = exponent
        precision = _MAX_INT64_FACTORS - (len(numerator) + len(denominator))
    elif exponent >= 0 and not denominator:
        mantissa = 1 << exponent
        precision = 15 - len(numerator) - int(exponent * 3 / 10) - 1
    else:
        precision = -1
    if precision >= 0:
        scale -= len(denominator)
        if scale >= _NANO:
            shifted = int(numerator + denominator)
            if shifted > _INT64_MAX:
                raise QuantityError(ERR_NUMERIC)
            result = shifted * mantissa
            if _INT64_MIN <= result <= _INT64_MAX:
                if not positive:
                    result = -result
                return Quantity(Fraction(result) * Fraction(10) ** scale, (result, scale))
    amount = _dec(value)
    amount = amount * (Fraction(10) ** exponent if base == 10 else Fraction(2) ** exponent)
    negative = amount < 0
    amount = abs(amount)
    if amount != 0:  # round up to the nano scale ("if you want some resources, you get some")
        nanos = amount * 10**9
        amount = Fraction(math.ceil(nanos), 10**9)
    if fmt == "BinarySI" and amount > _INT64_MAX:
        amount = Fraction(_INT64_MAX)
    return Quantity(-amount if negative else amount, None)
