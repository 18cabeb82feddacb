"""The AMD Instinct catalog, its driver-shaped ResourceSlices and the typed AMD requests (issue 26)."""

from __future__ import annotations

import pytest
import yaml

from dra_constructs import DraConstructsError, GpuClaimTemplate
from dra_constructs.catalog.amd import (
    AMD_GPU_ATTRIBUTES,
    AMD_GPU_SPECS,
    AMD_PARTITION_ATTRIBUTES,
    amd_gpu_spec,
    amd_partition_profile,
)
from dra_constructs.catalog.amd_devices import amd_resource_slices
from dra_constructs.cel import check
from dra_constructs.cli import main

from .helpers import new_chart, synth, validate_schema

_PCIE_ROOT = "resource.kubernetes.io/pcieRoot"


def test_models_and_valid_profiles_follow_the_kernel_rule() -> None:
    # aqua_vanjaram.c __aqua_vanjaram_is_valid_mode: SPX needs NPS1, DPX at most 2 memory
    # partitions, QPX/CPX NPS1 or NPS4 (CPX: NPS dividing the XCCs), TPX only with 6 XCCs.
    assert {s.key for s in AMD_GPU_SPECS} == {"MI300X", "MI325X", "MI350X", "MI355X", "MI300A"}
    assert list(amd_gpu_spec("MI300X").profiles_by_name) == [
        "spx_nps1", "dpx_nps1", "qpx_nps1", "qpx_nps4", "cpx_nps1", "cpx_nps4"]
    assert list(amd_gpu_spec("mi300a").profiles_by_name) == ["spx_nps1", "tpx_nps1", "cpx_nps1"]
    for model, profile in (("MI300X", "dpx_nps4"), ("MI300X", "spx_nps4"), ("MI300X", "tpx_nps1"),
                           ("MI300A", "qpx_nps1"), ("MI355X", "cpx_nps4")):
        with pytest.raises(DraConstructsError, match="supports"):
            amd_partition_profile(model, profile)
    assert amd_partition_profile("MI300X", "CPX/NPS4").name == "cpx_nps4"


def test_partitions_split_the_gpu_exactly() -> None:
    for spec in AMD_GPU_SPECS:
        for p in spec.profiles:
            assert p.compute_units * p.max_count == spec.compute_units, (spec.key, p.name)
            assert p.simd_units == 4 * p.compute_units
            assert spec.memory_bytes - 4096 * p.max_count < p.memory_bytes * p.max_count <= spec.memory_bytes
    # the published MI300X of the driver's docs/demo.md, and an MI300X CPX partition (1/8 of it)
    mi300x = amd_gpu_spec("MI300X")
    assert (mi300x.compute_units, mi300x.simd_units, mi300x.memory_bytes >> 20) == (304, 1216, 196592)
    assert amd_partition_profile("MI300X", "cpx_nps4").compute_units == 38


def test_slices_have_the_shape_the_driver_publishes() -> None:
    slices = amd_resource_slices(["MI300X"])
    nodes = {s["spec"]["nodeName"]: s["spec"]["devices"] for s in slices}
    assert len(nodes) == 6 and all(s["spec"]["driver"] == "gpu.amd.com" for s in slices)
    whole = nodes["catalog-amd-mi300x-spx-nps1"]
    assert len(whole) == 8
    assert set(whole[0]["attributes"]) == {*AMD_GPU_ATTRIBUTES, _PCIE_ROOT}
    assert whole[0]["attributes"]["type"] == {"string": "amdgpu"}
    assert whole[0]["attributes"]["productName"] == {"string": "AMD_Instinct_MI300X_OAM"}
    assert whole[0]["capacity"] == {"memory": {"value": "196592Mi"}, "computeUnits": {"value": "304"},
                                    "simdUnits": {"value": "1216"}}
    parts = nodes["catalog-amd-mi300x-cpx-nps4"]
    assert len(parts) == 64
    assert set(parts[0]["attributes"]) == {*AMD_PARTITION_ATTRIBUTES, _PCIE_ROOT}
    assert "deviceID" not in parts[0]["attributes"]  # deviceinfo.go: partitions carry parentDeviceID
    parents = [d["attributes"]["parentDeviceID"]["string"] for d in parts]
    assert len(set(parents)) == 8 and all(parents.count(p) == 8 for p in parents)
    assert all(d["name"] == f"gpu-{d['attributes']['cardIndex']['int']}-{d['attributes']['renderIndex']['int']}"
               for d in parts)
    # names repeat across nodes, as on real nodes; within one node they are unique
    assert all(len({d["name"] for d in devices}) == len(devices) for devices in nodes.values())
    for s in slices:
        validate_schema(s, "1.34")


def test_cli_prints_the_amd_slices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "--vendor", "amd", "--gpu", "MI300A", "--resource-slices", "v1"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["spec"]["nodeName"] for d in docs] == [
        "catalog-amd-mi300a-spx-nps1", "catalog-amd-mi300a-tpx-nps1", "catalog-amd-mi300a-cpx-nps1"]
    assert main(["catalog", "--vendor", "amd"]) == 0
    table = capsys.readouterr().out
    assert "cpx_nps4" in table and "MI355X" in table
    assert main(["catalog", "--vendor", "amd", "--gpu", "MI250"]) == 2


@pytest.mark.parametrize("model", [s.key for s in AMD_GPU_SPECS])
def test_every_profile_packs_to_its_catalog_maximum(model: str) -> None:
    chart = new_chart("1.34")
    for p in amd_gpu_spec(model).profiles:
        if p.whole_gpu:
            GpuClaimTemplate.amd_gpus(chart, f"{p.name}-max", models=[model], count=8)
            with pytest.raises(DraConstructsError, match="no node"):
                GpuClaimTemplate.amd_gpus(chart, f"{p.name}-over", models=[model], count=9)
            continue
        GpuClaimTemplate.amd_partition(chart, f"{p.name}-max", gpu=model, profile=p.name, count=p.max_count,
                                       same_gpu=True)
        with pytest.raises(DraConstructsError, match="parentDeviceID"):
            GpuClaimTemplate.amd_partition(chart, f"{p.name}-over", gpu=model, profile=p.name,
                                           count=p.max_count + 1, same_gpu=True)


def test_generated_selectors_pass_the_cel_checker_and_render() -> None:
    chart = new_chart("1.34")
    GpuClaimTemplate.amd_partition(chart, "cpx", gpu="MI300X", profile="cpx_nps4", count=2, same_gpu=True)
    (doc,) = synth(chart)
    validate_schema(doc, "1.34")
    request = doc["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert request["deviceClassName"] == "gpu.amd.com"
    expressions = [s["cel"]["expression"] for s in request["selectors"]]
    assert "device.attributes['gpu.amd.com'].partitionProfile == 'cpx_nps4'" in expressions
    assert all(check(e, "1.34").verdict == "OK" for e in expressions)
    assert doc["spec"]["spec"]["devices"]["constraints"] == [{"matchAttribute": "gpu.amd.com/parentDeviceID"}]


def test_amd_alignment_refuses_what_the_driver_does_not_publish() -> None:
    from dra_constructs import Alignment
    from dra_constructs.requests_amd import AmdGpuRequest, AmdPartitionRequest

    chart = new_chart("1.34")
    with pytest.raises(DraConstructsError, match=r"publishes no resource\.kubernetes\.io/numaNode"):
        GpuClaimTemplate(chart, "numa", requests=[AmdGpuRequest(models=["MI300X"], count=2)],
                         align=[Alignment(on="numaNode")])
    GpuClaimTemplate(chart, "root", requests=[AmdGpuRequest(models=["MI300X"], count=2)],
                     align=[Alignment(on="pcieRoot")])
    with pytest.raises(DraConstructsError, match="type amdgpu"):
        GpuClaimTemplate(chart, "spx", requests=[AmdPartitionRequest(gpu="MI300X", profile="spx_nps1")])
    with pytest.raises(DraConstructsError, match="not an AMD GPU model"):
        GpuClaimTemplate(chart, "bad", requests=[AmdGpuRequest(models=["MI250"])])
