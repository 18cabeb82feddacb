"""Fuzzing the readers and the command lines: exit 0/1/2, no traceback, bounded time and memory.

In-process (fast, many examples): every reader raises only ``DraConstructsError`` and every
command returns 0, 1 or 2, within a per-example deadline. A few examples also run in a fresh
process under 2 GB of address space and 60 s (tests/hostile/helpers.py).
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_constructs.agent.config import load_config
from dra_constructs.cel import devices_from_slices, load_resource_slices
from dra_constructs.cli import main
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails.loader import load_text

from .helpers import assert_clean, run_cli

_SETTINGS = settings(max_examples=150, deadline=timedelta(seconds=20), derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# Pieces of YAML/JSON that reach the corners: anchors and aliases, nesting, document markers,
# List wrappers, odd scalars, duplicate keys, escapes, tabs, BOMs.
_FRAGMENTS = st.sampled_from([
    "apiVersion: v1\n", "kind: Pod\n", "kind: List\n", "items:\n", "- ", "  ", "\n", "---\n", "...\n",
    "metadata: {name: x}\n", "spec:\n", "containers: ", "containers: {}\n", "[", "]", "{", "}", ", ",
    "&a ", "*a", "&b [*a, *a, *a]", "<<: *a\n", "a: 1\n", "a: 2\n", "count: 1e30\n", "count: .nan\n",
    '"\\ud800"', '"\\x00"', "NaN", "Infinity", "9" * 50, "\t", "\ufeff", "!!binary AA==", "? ", ": ",
    "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n", "devices: {requests: [{count: x}]}\n",
    "resources: {limits: {nvidia.com/gpu: 1}}\n", "[" * 300, "]" * 300, "{a: " * 150, "- - - - - - - - ",
    '{"apiVersion": "v1", "kind": "Pod"', '"kind": "Pod"',
])
_TEXTS = st.one_of(st.lists(_FRAGMENTS, max_size=40).map("".join), st.text(max_size=200))
_BYTES = st.one_of(_TEXTS.map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=200))

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


def _slice(spec: Any, devices: Any, device: Any, attribute: Any) -> dict[str, Any]:
    """A ResourceSlice whose fields the fuzzer replaces with arbitrary JSON values."""
    body = {"name": "gpu-0", "attributes": {"index": attribute}, "capacity": {"memory": device}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": spec,
            "spec": {"driver": "gpu.nvidia.com", "pool": {"name": "p"}, "devices": [body, devices]}}


@_SETTINGS
@given(text=_TEXTS, is_json=st.booleans())
def test_manifest_loader_raises_only_input_errors(text: str, is_json: bool) -> None:
    with contextlib.suppress(DraConstructsError):
        load_text(text, "fuzz.yaml", is_json=is_json)


@_SETTINGS
@given(data=_BYTES, fmt=st.sampled_from(["text", "json", "sarif"]))
def test_audit_command_exit_codes(data: bytes, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.yaml"
        path.write_bytes(data)
        assert main(["audit", "--format", fmt, str(path)]) in (0, 1, 2)
    capsys.readouterr()


@_SETTINGS
@given(data=_BYTES)
def test_cel_jsonl_command_exit_codes(data: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.jsonl"
        path.write_bytes(data)
        assert main(["cel", "check", "--jsonl", str(path)]) in (0, 1, 2)
    out = capsys.readouterr().out
    assert "NaN" not in out and "Infinity" not in out.replace('"Infinity"', "")


@_SETTINGS
@given(metadata=_JSON, devices=_JSON, capacity=_JSON, attribute=_JSON)
def test_resource_slices_raise_only_input_errors(metadata: Any, devices: Any, capacity: Any, attribute: Any,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    document = _slice(metadata, devices, capacity, attribute)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "slices.json"
        path.write_text(json.dumps(document))
        with contextlib.suppress(DraConstructsError):
            devices_from_slices(load_resource_slices(path))
        assert main(["cel", "match", "--slices", str(path), "device.attributes['gpu.nvidia.com'].index == 0"]) in (
            0, 1, 2)
    capsys.readouterr()


@_SETTINGS
@given(data=_BYTES, suffix=st.sampled_from([".yaml", ".json"]))
def test_node_agent_config_raises_only_input_errors(data: bytes, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"config{suffix}"
        path.write_bytes(data)
        with contextlib.suppress(DraConstructsError):
            load_config(path)


@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=_BYTES)
def test_fresh_process_under_the_limits(data: bytes) -> None:
    assert_clean(run_cli("audit", "-", stdin=data))
    assert_clean(run_cli("cel", "check", "--jsonl", "-", stdin=data))
