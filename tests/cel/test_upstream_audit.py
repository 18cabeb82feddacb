"""Cases where an audit against the upstream sources found ``check()`` wrong, now fixed.

Sources: kubernetes/apiserver ``pkg/cel/environment/base.go`` and ``pkg/cel/library/regex.go``
(v0.32.3, v0.34.2); kubernetes/dynamic-resource-allocation ``cel/compile.go`` (same tags);
google/cel-go at the versions their go.mod pins (v0.22.0 for 1.32.3, v0.26.0 for 1.34):
``parser/parser.go``, ``parser/gen/CEL.g4``, ``cel/program.go``, ``interpreter/optimizations.go``.
"""

from __future__ import annotations

import pytest

from dra_constructs.cel import check

A = "device.attributes['gpu.nvidia.com']"

CASES = [
    # Backtick-escaped identifiers: cel-go 0.22's grammar has no ESC_IDENTIFIER (lexer error);
    # cel-go 0.26 parses them but reports "unsupported syntax: '`'" unless the env enables
    # EnableIdentEscapeSyntax, which base.go never does. cel-cpp accepts them by default.
    (f"{A}.`foo-bar` == 1", "1.32.3", "Invalid"),
    (f"{A}.`foo-bar` == 1", "1.34", "Invalid"),
    (f"{A}.`index` == 1 || device.driver == 'x'", "1.34", "Invalid"),
    ("device.driver == '`x`'", "1.34", "OK"),  # a backtick inside a string literal is fine
    ("device.driver == 'x' // `comment`", "1.32.3", "OK"),
    # Constant regex patterns are compiled by env.Program (base ProgramOptions: OptOptimize, so
    # cel-go adds CompileRegexConstants with MatchesRegexOptimization, and regex.go adds
    # Find/FindAllRegexOptimization). An invalid one is "program instantiation failed", an
    # error result of CompileCELExpression, although the AST validator (matches, arg 0) passes.
    ("device.driver.find('[') == ''", "1.32.3", "Invalid"),
    ("device.driver.find('[') == ''", "1.34", "Invalid"),
    (f"{A}.productName.findAll('(', 2).size() == 0", "1.34", "Invalid"),
    ("matches(device.driver, '[')", "1.32.3", "Invalid"),  # global form: the pattern is arg 1
    ("device.driver.find('[a-z]+') == 'gpu'", "1.32.3", "OK"),
    ("device.driver.find(device.driver) == ''", "1.34", "OK"),  # not a constant: run time only
]


@pytest.mark.parametrize(("expression", "version", "verdict"), CASES)
def test_upstream_audit_verdicts(expression: str, version: str, verdict: str) -> None:
    assert check(expression, version).verdict == verdict


def test_backtick_messages_follow_the_cel_go_version() -> None:
    expression = f"{A}.`foo-bar` == 1"
    assert "token recognition error at: '`'" in (check(expression, "1.32.3").error or "")
    assert "<input>:1:37: unsupported syntax: '`'" in (check(expression, "1.34").error or "")


def test_constant_regex_checked_before_sharing_shapes() -> None:
    assert check("device.driver.find('[a-z]') == 'g'", "1.34").verdict == "OK"
    assert check("device.driver.find('[a-z') == 'g'", "1.34").verdict == "Invalid"
