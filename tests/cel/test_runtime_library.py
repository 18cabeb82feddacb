"""The scheduler's CEL runtime: Kubernetes list library, optional results, strings, RE2, no crash."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dra_constructs.catalog import catalog_resource_slices
from dra_constructs.cel import CelRuntimeError, Device, _runtime, evaluate, match_devices, matching
from dra_constructs.cel._regex import find_all
from dra_constructs.cli import main

GPU = Device("gpu.nvidia.com", "node-a", "gpu-0",
             {"uuid": {"string": "GPU-4f9c2f5e-1b2a-4c3d-9e8f-0a1b2c3d4e5f"}, "type": {"string": "gpu"},
              "index": {"int": 3}, "cudaComputeCapability": {"version": "9.0.0"}},
             {"memory": "80Gi"})
A = "device.attributes['gpu.nvidia.com']"


@pytest.mark.parametrize("version", ["1.32", "1.35"])
@pytest.mark.parametrize("expression", [
    "[1, 3, 3].isSorted() && ![2, 1].isSorted() && [1.5, 2.0].isSorted()",
    "[4, 5].sum() == 9 && [1.5, 2.5].sum() == 4.0 && [1u, 2u].sum() == 3u",
    "[1u].sum() + 1u == 2u",  # uint, not int: the sum keeps the element type
    "[7, 2, 9].min() == 2 && [7, 2, 9].max() == 9",
    "[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2 && [1].indexOf(5) == -1",
    f"[{A}.index, {A}.index].max() == 3 && [{A}.index].sum() == 3",
    f"!format.dns1123Label().validate({A}.type).hasValue()",
    "format.dns1123Label().validate('Not_A_Label').hasValue()",
    "format.dns1123Label().validate('Not_A_Label').value().size() > 0",
    f"{A}.type.substring(1, 3) == 'pu' && 'abc'.substring(0, 3) == 'abc' && 'abc'.substring(3, 3) == ''",
    f"{A}.uuid.find('[0-9]+') == '4' && {A}.uuid.findAll('[0-9]+', 2) == ['4', '9']",
    f"{A}.uuid.findAll('(.*)*x') == []",  # catastrophic for a backtracking engine; RE2 is linear
    "'baaac'.findAll('a*') == ['', 'aaa', '']",  # Go skips an empty match right after a match
])
def test_kubernetes_runtime_library(version: str, expression: str) -> None:
    assert evaluate(expression, GPU, version) is True


@pytest.mark.parametrize("expression", [
    "{'a': 1}.transformMap(k, v, v + 1) == {'a': 2}",
    "{'a': 1, 'b': 2}.transformMap(k, v, v > 1, v * 10) == {'b': 20}",
    "{'a': 1}.transformMapEntry(k, v, {k + 'x': v}) == {'ax': 1}",
    "[5, 6].transformMap(i, v, v * 2) == {0: 10, 1: 12}",
])
def test_two_variable_map_macros(expression: str) -> None:
    assert evaluate(expression, GPU, "1.34") is True


@pytest.mark.parametrize(("expression", "message"), [
    ("[0].max() == 0 && [1].filter(x, x > 1).max() == 0", r"max\(list\) called on empty list"),
    ("'abc'.substring(2, 4) == ''", "index out of range: 4"),
    ("[9223372036854775807, 1].sum() == 0", "integer overflow"),
    ("{'a': 1, 'b': 1}.transformMapEntry(k, v, {'x': v}) == {}", "already exists"),
])
def test_library_errors_are_runtime_errors(expression: str, message: str) -> None:
    with pytest.raises(CelRuntimeError, match=message):
        evaluate(expression, GPU, "1.34")


def test_go_find_all_semantics() -> None:
    assert find_all("héllo wörld", "[^ ]+") == ["héllo", "wörld"]
    assert find_all("aaa", "a", 2) == ["a", "a"] and find_all("aaa", "a", 0) == []
    assert find_all("abc", "") == ["", "", "", ""]


class _Exploding:
    def eval(self, _activation: Any) -> Any:
        raise RuntimeError("UNIMPLEMENTED: Unimplemented type: 13 [UNIMPLEMENTED]")


def test_engine_failure_is_a_runtime_error() -> None:
    with pytest.raises(CelRuntimeError, match=r"^Unimplemented type: 13$") as caught:
        _runtime.run(_Exploding(), None)
    assert not caught.value.__cause__


def test_engine_failure_in_one_selector_is_that_selectors_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*_: object) -> bool:
        raise TypeError("boom")

    monkeypatch.setattr(matching, "_eval_direct", explode)
    result = match_devices([], ["device.driver == 'crash.example.com'"], [GPU], "1.34")
    assert result == {GPU.id: "error: TypeError: boom"}


def test_match_jsonl_isolates_a_failing_expression(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    slices = tmp_path / "slices.yaml"
    slices.write_text(yaml.safe_dump_all(catalog_resource_slices(["A100_40GB"], resource_version="v1beta1")))
    crash, fine = "device.driver == 'boom.example.com'", "device.driver == 'gpu.nvidia.com'"
    real = matching.match_devices

    def flaky(class_selectors: Any, request_selectors: Any, devices: Any, target: Any = "1.32") -> Any:
        if request_selectors == [crash]:
            raise RuntimeError("INTERNAL: engine exploded")
        return real(class_selectors, request_selectors, devices, target)

    monkeypatch.setattr("dra_constructs.cel.match_devices", flaky)
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("\n".join(json.dumps({"expression": e}) for e in (crash, fine)) + "\n")
    assert main(["cel", "match", "--slices", str(slices), "--jsonl", str(jsonl)]) == 1
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert first["matches"] is None and first["error"] == "error: RuntimeError: INTERNAL: engine exploded"
    assert isinstance(second["matches"], dict) and "error" not in second


@pytest.mark.parametrize(("expression", "expected"), [
    (f"{A}.index == 'x'", False), (f"{A}.index != 'x'", True), (f"{A}.type == 1", False),
    (f"{A}.type != 1.5", True), (f"'x' == {A}.cudaComputeCapability", False), (f"{A}.type in [1, 2]", False),
    (f"{A}.index in ['a']", False), (f"{A}.cudaComputeCapability == null", False),
    (f"{A}.cudaComputeCapability in [b'x']", False),  # bytes: no set, cel-go's Contains skips errors
])
def test_heterogeneous_equality(expression: str, expected: bool) -> None:
    assert evaluate(expression, GPU, "1.34") is expected


@pytest.mark.parametrize("expression", [
    "optional.of(1) == optional.of(1)", "optional.of(1) in [optional.of(1)]", "[optional.none()] == [optional.none()]",
    f"{A}[?'index'] == optional.of(3)",
])
def test_optionals_stay_in_the_engine(expression: str) -> None:
    assert evaluate(expression, GPU, "1.34") is True  # passing an optional to Python crashed the process


def test_optionals_the_engine_cannot_take_are_errors() -> None:
    with pytest.raises(CelRuntimeError, match="mapInsert"):
        evaluate("{'a': 1}.transformMap(k, v, optional.of(v)).size() == 1", GPU, "1.34")


@pytest.mark.parametrize("expression", [
    f"{A}[?'type'][0] == 1",  # a dyn that holds an optional at run time
    f"cel.bind(o, {A}[?'type'], o == {A}.type)",
])
def test_optional_behind_dyn_is_a_result_not_a_crash(expression: str) -> None:
    with contextlib.suppress(CelRuntimeError):  # an error result is fine; a segfault of the process was not
        assert evaluate(expression, GPU, "1.32") in (True, False)
