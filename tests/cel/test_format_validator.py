"""cel-go's static check of string.format with a literal format string, as the API server runs it."""

from __future__ import annotations

import pytest

from dra_constructs.cel import check


@pytest.mark.parametrize("version", ["1.32.3", "1.34"])
@pytest.mark.parametrize(
    ("expression", "verdict", "message"),
    [
        ("'%s %d'.format(['a', 1]) == 'a 1'", "OK", None),  # format's list literal is exempt from homogeneity
        ("'%.2f'.format([1.5]) == '1.50'", "OK", None),
        ("'%x'.format([b'ab']) == '6162'", "OK", None),
        ("'%s'.format([[1, 'a']]) == ''", "OK", None),
        ("'100%%'.format([]) == '100%'", "OK", None),
        # an attribute value is `any` in cel-go: no clause accepts it (only `dyn` passes every clause)
        ("'%s'.format([device.attributes['gpu.nvidia.com'].profile]) == '1g.5gb'", "Invalid",
         "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, "
         "and timestamps, was given google.protobuf.Any"),
        ("'%d'.format([device.attributes['gpu.nvidia.com'].index]) == '1'", "Invalid",
         "decimal clause can only be used on integers, was given google.protobuf.Any"),
        ("cel.bind(g, device.attributes['gpu.nvidia.com'], '%s-%d'.format([g.profile, g.index])) == ''", "Invalid",
         "was given google.protobuf.Any"),
        ("'%s'.format([[device.attributes['gpu.nvidia.com'].profile]]) == ''", "Invalid",
         "was given google.protobuf.Any"),
        ("'%s'.format([dyn(device.attributes['gpu.nvidia.com'].profile)]) == '1g.5gb'", "OK", None),
        ("'%s'.format([device.attributes['gpu.nvidia.com'].profile.x]) == ''", "OK", None),  # select on any: dyn
        ("'%d'.format([device.attributes['gpu.nvidia.com'].index + 1]) == '1'", "OK", None),  # `_+_` on any: dyn
        ("'%d'.format(['a']) == 'x'", "Invalid", "decimal clause can only be used on integers, was given string"),
        ("'%s'.format([1, 2]) == 'x'", "Invalid", "too many arguments supplied to string.format"),
        ("'%z'.format([1]) == ''", "Invalid", 'unrecognized formatting clause "z"'),
        ("'%d %d'.format([1]) == ''", "Invalid", "index 1 out of range"),
        ("'%.f'.format([1.5]) == ''", "Invalid", "error while parsing precision"),
        ("'%b'.format([1.5]) == ''", "Invalid", "formatted as binary"),
        ("'%s'.format([quantity('1')]) == ''", "Invalid", "string clause can only be used on"),
        ("'%d'.format([[1]]) == ''", "Invalid", "decimal clause can only be used on integers, was given list"),
        ("['a', 1].size() == 2", "Invalid", "expected type 'string' but found 'int'"),
    ],
)
def test_string_format_static_check(version: str, expression: str, verdict: str, message: str | None) -> None:
    result = check(expression, version)
    assert result.verdict == verdict, result.error
    if message is not None:
        assert result.error is not None and message in result.error
