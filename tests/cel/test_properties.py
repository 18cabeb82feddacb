"""Property tests: the checker and helpers never crash, whatever the input."""

from __future__ import annotations

import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st

from dra_constructs.cel import check, split_conjuncts, suggest_fix
from dra_constructs.cel.quantity import QuantityError, parse_quantity

CEL_ALPHABET = st.sampled_from(list(
    "device.attributes['gpu.nvidia.com'] capacity quantity(\"1Gi\") >=<!=&|?:,0123456789+-*/%{}[]()\\\"'\n\tbx"))
FRAGMENTS = st.lists(st.sampled_from([
    "device", ".driver", ".attributes", "['gpu.nvidia.com']", ".profile", " == ", "'x'", " && ", " || ",
    "quantity('1Gi')", ".compareTo(", ")", "(", " >= ", "0", "semver('1.0.0')", ".all(x, ", "x", "[1, 2]",
    "cel.bind(a, ", ", ", "has(", "?", ":", "true", "\"", "\\", "{", "}", "1u", "2.5", "b'x'", "null",
]), max_size=12).map("".join)


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.text(max_size=60), st.text(CEL_ALPHABET, max_size=80), FRAGMENTS),
       st.sampled_from(["1.32", "1.32.1", "1.33", "1.34", "1.36"]))
def test_check_never_raises(expression: str, version: str) -> None:
    result = check(expression, version)
    assert result.verdict in ("OK", "Invalid", "TooLong", "Forbidden")
    assert (result.error is None) == (result.verdict == "OK")
    assert (result.cost is not None) == (result.verdict in ("OK", "Forbidden"))
    split_conjuncts(expression)
    suggest_fix(expression, result.error)


@settings(max_examples=150, deadline=None)
@given(st.text(st.sampled_from(list("0123456789.eEinumkKMGTP+-i ")), max_size=12))
def test_quantity_parse_only_raises_quantity_error(text: str) -> None:
    with contextlib.suppress(QuantityError):
        parse_quantity(text)
