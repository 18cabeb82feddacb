"""ResourceSlices from files in the v1beta1, v1beta2 and v1 shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from dra_constructs.catalog import catalog_resource_slices
from dra_constructs.cel import devices_from_slices, load_resource_slices
from dra_constructs.errors import DraConstructsError


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2", "v1"])
def test_every_shape_gives_the_same_devices(version: str) -> None:
    devices = devices_from_slices(catalog_resource_slices(["A100_40GB"], resource_version=version))
    reference = devices_from_slices(catalog_resource_slices(["A100_40GB"], resource_version="v1"))
    assert [d.id for d in devices] == [d.id for d in reference]
    assert [dict(d.attributes) for d in devices] == [dict(d.attributes) for d in reference]
    assert devices[0].capacity["memory"] == "40960Mi"


def test_list_multidoc_and_json(tmp_path: Path) -> None:
    slices = catalog_resource_slices(["A30"], resource_version="v1beta1")
    (tmp_path / "list.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": slices}))
    (tmp_path / "multi.yaml").write_text(yaml.safe_dump_all(slices))
    (tmp_path / "slices.json").write_text(json.dumps({"kind": "ResourceSliceList", "items": slices}))
    loaded = [load_resource_slices(tmp_path / name) for name in ("list.yaml", "multi.yaml", "slices.json")]
    assert loaded[0] == loaded[1] == loaded[2] == slices
    assert len(load_resource_slices([tmp_path / "list.yaml", tmp_path / "multi.yaml"])) == 2 * len(slices)


def test_capacity_and_pool_fields() -> None:
    slice_ = {"kind": "ResourceSlice", "metadata": {"name": "s"},
              "spec": {"driver": "d.example.com", "pool": {"name": "node-1"}, "nodeName": "node-1",
                       "devices": [{"name": "x", "attributes": {"d.example.com/a": {"int": 1}},
                                    "capacity": {"mem": {"value": "1Gi"}}, "allowMultipleAllocations": True}]}}
    (device,) = devices_from_slices([slice_])
    assert (device.id, device.node, device.capacity, device.allow_multiple_allocations) == (
        "d.example.com/node-1/x", "node-1", {"mem": "1Gi"}, True)
    assert device.attribute("d.example.com", "a") == {"int": 1}


@pytest.mark.parametrize("content", ["kind: Pod\n", "- 1\n- 2\n", "a: [\n"])
def test_bad_files_are_input_errors(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(DraConstructsError):
        load_resource_slices(path)
    with pytest.raises(DraConstructsError):
        load_resource_slices(tmp_path / "missing.yaml")
