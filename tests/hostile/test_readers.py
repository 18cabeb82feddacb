"""The hardened readers in-process: budgets, special files, shapes, locations, one finding per file."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dra_constructs._io import ReadBudget, read_input
from dra_constructs.cel import devices_from_slices, load_resource_slices
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails import audit, load_paths
from dra_constructs.guardrails.locate import with_field_lines

UNSAFE = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: t}
spec:
  template:
    spec:
      containers:
      - name: c
        image: i
        resources:
          limits: {nvidia.com/gpu: 1}
"""


def test_budget_is_shared_by_all_inputs_of_a_run(tmp_path: Path) -> None:
    for name in ("a.yaml", "b.yaml"):
        (tmp_path / name).write_text("x" * 600)
    budget = ReadBudget(1000, 1000)
    read_input(tmp_path / "a.yaml", "f", "file", budget=budget)
    with pytest.raises(DraConstructsError, match=r"limit is 1000 bytes per run \(600 bytes already read"):
        read_input(tmp_path / "b.yaml", "f", "file", budget=budget)


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "p.yaml"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(DraConstructsError, match="FIFO"):
        load_paths([str(tmp_path)])
    assert time.monotonic() - start < 5


def test_same_unsafe_object_in_two_files_is_reported_in_each(tmp_path: Path) -> None:
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(UNSAFE)
    second.write_text("# a copy\n\n" + UNSAFE)
    texts: dict[str, str] = {}
    result = with_field_lines(audit(load_paths([str(tmp_path)], texts=texts)), texts)
    places = {(Path(f.file or "").name, f.line) for f in result.findings if f.rule == "DRA001"}
    assert places == {("a.yaml", 11), ("b.yaml", 13)}


def test_located_lines_are_right_behind_many_documents(tmp_path: Path) -> None:
    path = tmp_path / "many.yaml"
    filler = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"
    path.write_text("---\n".join([filler] * 200 + [UNSAFE]))
    result = with_field_lines(audit(load_paths([str(path)])))
    [line] = {f.line for f in result.findings if f.rule == "DRA001"}
    assert line is not None and "nvidia.com/gpu" in path.read_text().splitlines()[line - 1]


def test_wrong_typed_slice_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\nspec:\n"
                    "  driver: d\n  devices:\n  - name: g\n    attributes:\n      index: {int: two}\n")
    with pytest.raises(DraConstructsError) as raised:
        devices_from_slices(load_resource_slices(path))
    assert raised.value.path == f"{path}:9"
    assert raised.value.field == "spec.devices[0].attributes.index.int"
    assert "64-bit integer" in raised.value.problem


def test_valid_slices_still_load(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("apiVersion: resource.k8s.io/v1beta1\nkind: ResourceSlice\nmetadata: {name: s}\nspec:\n"
                    "  driver: gpu.nvidia.com\n  pool: {name: p}\n  devices:\n  - name: g\n    basic:\n"
                    "      attributes: {index: {int: 0}, uuid: {string: GPU-1}}\n"
                    "      capacity: {memory: {value: 80Gi}}\n")
    [device] = devices_from_slices(load_resource_slices(path))
    assert device.capacity == {"memory": "80Gi"} and device.attributes["index"] == {"int": 0}


def test_set_inventory_refuses_wrong_typed_slices(tmp_path: Path) -> None:
    import cdk8s

    from dra_constructs import set_inventory

    path = tmp_path / "s.json"
    path.write_text('{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"}, '
                    '"spec": {"driver": "gpu.nvidia.com", "devices": 5}}')
    with pytest.raises(DraConstructsError, match=r"spec\.devices.*must be a list of devices"):
        set_inventory(cdk8s.Testing.app(), str(path))
