"""``check_many`` (stage-by-stage batches) gives exactly what ``check`` called in order gives."""

from __future__ import annotations

import pytest

from dra_constructs.cel import check, check_many
from dra_constructs.cel import checker as checker_module
from dra_constructs.errors import DraConstructsError

_DEEP = "(device.driver == 'a' || " * 40 + "device.attributes['gpu.nvidia.com'].index == 3" + ")" * 40

CORPUS = [
    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100'",
    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100'",  # same shape as the first
    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100'",  # same text as the first
    "device.capacity['gpu.nvidia.com'].memory >= quantity('40Gi')",  # compile error, with a fix
    "device.attributes['gpu.nvidia.com'].productName.matches('[')",  # AST validator
    "int('abc') == 0",  # constant folding at program construction
    "device.attributes['gpu.nvidia.com'].profile",  # an attribute value (any) is an allowed result
    "device.attributes['gpu.nvidia.com'].profile + ''",  # dyn result
    "device.attributes['d'].x.exists(c, true)",  # cel-go's any range error
    "device.attributes['d'].x.y.exists(c, true)",  # a dyn range: no size bound, Forbidden
    "device.attributes.`gpu.nvidia.com`.index == 0",  # backtick escape
    "x" * 10_241,  # TooLong
    _DEEP,  # compiled in pieces
    "cel.bind(g, device.attributes['gpu.nvidia.com'], g.type == 'mig' && g.uuid != 'u')",
    "device.capacity['gpu.nvidia.com'].exists(k, k.startsWith('memorySlice'))",
]


@pytest.fixture()
def fresh_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("_results", "_compiled", "_shapes"):
        monkeypatch.setattr(checker_module, name, {})


def _clear() -> None:
    for cache in (checker_module._results, checker_module._compiled, checker_module._shapes):
        cache.clear()


@pytest.mark.parametrize("target", ["1.32", "1.32.0", "1.34"])
def test_check_many_equals_check_in_order(fresh_caches: None, target: str) -> None:
    batched = check_many(CORPUS, target)
    _clear()
    one_by_one = [check(expression, target) for expression in CORPUS]
    assert batched == one_by_one
    assert {result.verdict for result in batched} == {"OK", "Invalid", "TooLong", "Forbidden"}
    assert batched[2].cached and not batched[1].cached  # a repeated text comes from the cache


def test_check_many_in_several_batches(fresh_caches: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checker_module, "_BATCH", 4)
    expressions = [f"device.attributes['gpu.nvidia.com'].index == {i} && '{'x' * i}' != ''" for i in range(11)]
    batched = check_many([*expressions, "1 +", *expressions[:3]], "1.34")
    _clear()
    assert batched == [check(expression, "1.34") for expression in [*expressions, "1 +", *expressions[:3]]]


def test_an_engine_failure_stays_that_expressions(fresh_caches: None, monkeypatch: pytest.MonkeyPatch) -> None:
    real = checker_module._refusal

    def failing(expression: str, *args: object) -> object:
        if "boom" in expression:
            raise RuntimeError("engine fault")
        return real(expression, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(checker_module, "_refusal", failing)
    results = check_many(["device.driver == 'a'", "device.driver == 'boom\\n'", "device.driver == 'c'"], "1.34")
    assert [result.verdict for result in results] == ["OK", "Invalid", "OK"]
    assert results[1].error == "internal error: RuntimeError: engine fault"
    _clear()
    assert check("device.driver == 'boom\\n'", "1.34") == results[1]


def test_check_many_refuses_a_non_string(fresh_caches: None) -> None:
    with pytest.raises(DraConstructsError, match="must be a string"):
        check_many(["true", 3], "1.34")  # type: ignore[list-item]
