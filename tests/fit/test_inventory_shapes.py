"""The catalog's synthetic ResourceSlices in the DynamicMIG and static shapes, per target."""

from __future__ import annotations

import json
from typing import Any

import kubernetes_validate
import pytest

from dra_constructs import DraConstructsError
from dra_constructs.catalog import GPU_SPECS, catalog_resource_slices, gpu_spec
from dra_constructs.fit import Inventory
from dra_constructs.target import Target

# One worker for the file: from 1.36 the default shape is the dynamic one, so two dynamic-shape cases ask
# for the very slices a default-shape case validated already (``_validate`` answers them from memory).
pytestmark = pytest.mark.xdist_group("inventory-shapes")

#: (schema version, slice as canonical JSON) validated without an error in this process.
_VALID: set[tuple[str, str]] = set()


def _validate(resource_slice: dict[str, Any], schema_version: str) -> None:
    """kubernetes-validate's strict check; an identical slice at the same version is checked once."""
    key = (schema_version, json.dumps(resource_slice, sort_keys=True))
    if key not in _VALID:
        kubernetes_validate.validate(resource_slice, schema_version, strict=True)
        _VALID.add(key)


@pytest.mark.parametrize("version", ["1.32", "1.33", "1.34", "1.35", "1.36", "1.37"])
def test_the_default_shape_of_each_target_is_schema_valid(version: str) -> None:
    target = Target.parse(version)
    slices = catalog_resource_slices(resource_version=target.resource_version, mig_mode=target.default_mig_mode,  # type: ignore[arg-type]
                                     split_counter_sets=target.counter_sets_in_own_slice)
    for resource_slice in slices:
        _validate(resource_slice, target.schema_version)
    for resource_slice in slices:
        spec = resource_slice["spec"]
        devices = spec.get("devices", [])
        assert len(devices) <= (64 if any("consumesCounters" in d for d in devices) else 128)
        assert len(spec.get("sharedCounters", [])) <= 8
        assert all(len(d.get("consumesCounters", [])) <= 2 for d in devices)
        if target.counter_sets_in_own_slice and spec.get("sharedCounters"):
            assert not devices  # from 1.35 a counter-set slice holds no devices


@pytest.mark.parametrize("version", ["1.33", "1.34", "1.35", "1.36", "1.37"])
def test_dynamic_shape_is_schema_valid_where_partitionable_devices_exist(version: str) -> None:
    target = Target.parse(version)
    for resource_slice in catalog_resource_slices(resource_version=target.resource_version, mig_mode="dynamic",
                                                  split_counter_sets=target.counter_sets_in_own_slice):
        _validate(resource_slice, target.schema_version)


def test_defaults_follow_the_feature_maturity() -> None:
    assert [Target.parse(f"1.{m}").default_mig_mode for m in range(32, 38)] == ["static"] * 4 + ["dynamic"] * 2
    assert [Target.parse(f"1.{m}").counter_sets_in_own_slice for m in range(32, 38)] == [False] * 3 + [True] * 3
    gates = Target.parse("1.34").default_feature_gates
    assert gates["DRAPrioritizedList"] and gates["DRAAdminAccess"] and not gates["DRAPartitionableDevices"]
    assert Target.parse("1.36").default_feature_gates["DRAPartitionableDevices"]
    with pytest.raises(DraConstructsError, match=r"1\.33"):
        Target.parse("1.32").check_mig_mode("dynamic", "x")


def test_dynamic_mig_counter_set_and_consumption_follow_the_driver() -> None:
    (counters, gpu0, *_) = catalog_resource_slices(["A100_80GB"], gpus_per_node=1, mig_mode="dynamic",
                                                   split_counter_sets=True)
    (counter_set,) = counters["spec"]["sharedCounters"]
    assert counter_set["name"] == "gpu-0-counter-set"
    assert set(counter_set["counters"]) == {"multiprocessors", "memory", "copy-engines", "decoders", "encoders",
                                            "jpeg-engines", "ofa-engines", *(f"memory-slice-{i}" for i in range(8))}
    devices = {d["name"]: d for d in gpu0["spec"]["devices"]}
    assert devices["gpu-0"]["consumesCounters"][0]["counters"] == counter_set["counters"]  # the full GPU: everything
    three = devices["gpu-0-mig-3g40gb-9-4"]["consumesCounters"][0]["counters"]
    assert {k for k in three if k.startswith("memory-slice")} == {f"memory-slice-{i}" for i in range(4, 8)}
    assert "memorySlice4" not in devices["gpu-0-mig-3g40gb-9-4"]["capacity"]  # placement is not a capacity
    assert "uuid" not in devices["gpu-0-mig-3g40gb-9-4"]["attributes"]  # not created yet
    assert "gpu-0-mig-1g10gb-me-20-6" in devices  # '+' becomes '-' (toRFC1123Compliant)


@pytest.mark.parametrize("spec", GPU_SPECS, ids=lambda s: s.key)
def test_every_placement_is_advertised(spec: object) -> None:
    model = gpu_spec(spec.key)  # type: ignore[attr-defined]
    slices = catalog_resource_slices([model.key], gpus_per_node=1, mig_mode="dynamic")
    names = {d["name"] for s in slices for d in s["spec"].get("devices", [])}
    for profile in model.mig_profiles:
        starts = sorted(int(n.rsplit("-", 1)[1]) for n in names
                        if n.startswith("gpu-0-mig-") and f"-{profile.profile_id}-" in n
                        and n.split("-")[3] == profile.name.split(".")[0] + profile.name.split(".")[1].split("+")[0])
        assert tuple(starts) == profile.placements, profile.name
        assert len(profile.placements) >= profile.max_count


def test_user_inventories_with_counters_are_read_as_they_are() -> None:
    slices = catalog_resource_slices(["H100_80GB"], gpus_per_node=2, mig_mode="dynamic", split_counter_sets=True)
    inventory = Inventory.from_slices(slices)
    (pool,) = inventory.pools
    assert set(pool.counter_sets) == {"gpu-0-counter-set", "gpu-1-counter-set"}
    assert not pool.incomplete and pool.slice_count == 3
    device = next(d for d in inventory.devices if d.device.name == "gpu-1-mig-2g20gb-14-2")
    ((counter_set, counters),) = device.consumes
    assert counter_set == "gpu-1-counter-set" and dict(counters)["memory-slice-3"] == 1


def test_catalog_command_prints_the_dynamic_shape(capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from dra_constructs.cli import main

    assert main(["catalog", "--gpu", "A30", "--resource-slices", "v1", "--mig-mode", "dynamic",
                 "--separate-counter-slices"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert docs[0]["spec"]["sharedCounters"] and "devices" not in docs[0]["spec"]
    assert all("consumesCounters" in d for d in docs[1]["spec"]["devices"])
