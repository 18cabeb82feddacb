"""Topology alignment (issue 16): Alignment -> matchAttribute, NIC requests, the catalog's HGX topology,
the construct-time fit check of aligned claims, DRA016 and DRA007's replacement text."""

from __future__ import annotations

from collections import Counter
from typing import Any

import cdk8s
import pytest

from dra_constructs import (
    Alignment,
    DraConstructsError,
    GpuClaimTemplate,
    GpuModel,
    GpuRequest,
    MigRequest,
    NicRequest,
    Target,
    set_kubernetes_version,
    set_nvidia_driver_version,
)
from dra_constructs.catalog import catalog_resource_slices
from dra_constructs.guardrails import audit

from .helpers import new_chart, synth, validate_schema

H100 = (GpuModel.H100_80GB,)
NUMA = "resource.kubernetes.io/numaNode"
ROOT = "resource.kubernetes.io/pcieRoot"


def _constraints(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return list(doc["spec"]["spec"]["devices"]["constraints"])


@pytest.mark.parametrize("version", ["1.32", "1.34"])
def test_example_claim_renders_numa_and_pcie_constraints_and_validates(version: str) -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import topology_training

    app = cdk8s.Testing.app()
    set_kubernetes_version(app, version)
    docs = synth(topology_training.build(app))
    for doc in docs:
        validate_schema(doc, version)
    template = next(d for d in docs if d["kind"] == "ResourceClaimTemplate")
    assert template["apiVersion"] == f"resource.k8s.io/{Target.parse(version).resource_version}"
    assert _constraints(template) == [{"matchAttribute": NUMA, "requests": ["gpu-0", "gpus"]},
                                      {"matchAttribute": ROOT, "requests": ["gpu-0", "nic"]}]
    result = audit(docs, kubernetes_version=version)
    assert result.errors == () and "DRA016" not in {f.rule for f in result.findings}


@pytest.mark.parametrize(("version", "mig_mode"), [("1.32", "static"), ("1.34", "static"), ("1.34", "dynamic")])
def test_more_aligned_gpus_than_one_numa_node_fails_naming_the_constraint(version: str, mig_mode: str) -> None:
    chart = new_chart(version)
    set_nvidia_driver_version(chart, "main")  # the first driver that publishes numaNode on GPUs
    with pytest.raises(DraConstructsError) as info:
        GpuClaimTemplate(chart, "five", requests=[GpuRequest(name="gpus", count=5, models=H100)],
                         align=[Alignment(on="numaNode")], mig_mode=mig_mode)
    assert info.value.field == "constraints"
    assert NUMA in str(info.value) and "4 GPUs per NUMA node" in info.value.fix
    # the same five GPUs unaligned fit (one HGX node has eight), and four aligned fit
    GpuClaimTemplate(chart, "five-loose", requests=[GpuRequest(name="gpus", count=5, models=H100)], mig_mode=mig_mode)
    GpuClaimTemplate(chart, "four", requests=[GpuRequest(name="gpus", count=4, models=H100)],
                     align=[Alignment(on="numaNode")], mig_mode=mig_mode)


def test_gpu_and_nic_on_one_pcie_root() -> None:
    chart = new_chart("1.34")
    two = [GpuRequest(name="gpus", count=2, models=H100), NicRequest(count=2, rdma=True)]
    GpuClaimTemplate(chart, "pair", requests=two, align=[Alignment(on="pcieRoot")])
    with pytest.raises(DraConstructsError) as info:  # three GPUs never share a root (two per switch)
        GpuClaimTemplate(chart, "three", requests=[GpuRequest(name="gpus", count=3, models=H100),
                                                  NicRequest(rdma=True)], align=[Alignment(on="pcieRoot")])
    assert ROOT in str(info.value) and info.value.field == "constraints"
    with pytest.raises(DraConstructsError) as nics:  # two NICs per root
        GpuClaimTemplate(chart, "nics", requests=[GpuRequest(name="gpu", models=H100), NicRequest(count=3)],
                         align=[Alignment(on="pcieRoot")])
    assert ROOT in str(nics.value)


def test_nic_selector_goes_through_the_cel_checker_and_the_inventory() -> None:
    chart = new_chart("1.34")
    with pytest.raises(DraConstructsError) as invalid:
        GpuClaimTemplate(chart, "bad", requests=[NicRequest(selectors=("device.attributes['dra.net'].rdma = true",))])
    assert "requests['nic'].selectors" in invalid.value.field
    with pytest.raises(DraConstructsError) as runtime:  # an attribute the NICs do not publish
        GpuClaimTemplate(chart, "missing",
                         requests=[NicRequest(selectors=("device.attributes['dra.net'].speed > 100",))])
    assert "run-time error" in runtime.value.problem
    with pytest.raises(DraConstructsError) as none:  # a NUMA node the board does not have
        GpuClaimTemplate(chart, "numa7", requests=[NicRequest(
            selectors=("device.attributes['resource.kubernetes.io'].numaNode == 7",))])
    assert "no node of the inventory" in none.value.problem
    # another network driver's class: checked by CEL, not fit-checked against the catalog's DraNet NICs
    GpuClaimTemplate(chart, "sriov", requests=[GpuRequest(name="gpu", models=H100), NicRequest(
        device_class_name="sriovnetwork.k8snetworkplumbingwg.io",
        selectors=("device.attributes['sriovnetwork.k8snetworkplumbingwg.io'].vendor == '15b3'",))],
        align=[Alignment(on="pcieRoot")])


def test_alignments_the_devices_cannot_honour_are_refused() -> None:
    chart = new_chart("1.34")
    with pytest.raises(DraConstructsError) as parent:
        GpuClaimTemplate(chart, "whole", requests=[GpuRequest(name="gpus", count=2, models=H100)],
                         align=[Alignment(on="parentGPU")])
    assert parent.value.field == "align[0].on" and "parentUUID" in parent.value.problem
    with pytest.raises(DraConstructsError) as unknown:
        GpuClaimTemplate(chart, "typo", requests=[GpuRequest(name="gpus", count=2, models=H100)],
                         align=[Alignment(on="numaNode", requests=("gpu",))])
    assert unknown.value.field == "align[0].requests" and "gpus" in unknown.value.fix
    with pytest.raises(DraConstructsError) as one:
        GpuClaimTemplate(chart, "one", requests=[GpuRequest(name="gpu", models=H100)], align=[Alignment(on="numaNode")])
    assert "nothing to align" in one.value.problem
    with pytest.raises(DraConstructsError) as rdma:
        NicRequest(device_class_name="other.example.com", rdma=True).validate_for("x")
    assert "dra.net/rdma" in rdma.value.problem
    with pytest.raises(DraConstructsError):
        Alignment(on="socket")  # type: ignore[arg-type]
    slices = GpuClaimTemplate(chart, "mig", requests=[MigRequest(gpu=GpuModel.H100_80GB, profile="1g.10gb", count=2)],
                              align=[Alignment(on="parentGPU")])
    assert slices.requests[0].count == 2


@pytest.mark.parametrize("minor", range(32, 38))
def test_target_names_the_standard_attributes(minor: int) -> None:
    target = Target(minor=minor)
    assert target.topology_attribute("numaNode") == NUMA
    assert target.topology_attribute("pcieRoot") == ROOT
    assert target.topology_attribute("parentGPU") == "gpu.nvidia.com/parentUUID"


def test_catalog_node_is_an_hgx_board_with_nics_beside_the_gpus() -> None:
    slices = catalog_resource_slices(models=["H100_80GB"], network=True)
    node = [s for s in slices if s["spec"]["nodeName"] == "catalog-h100-80gb"]
    gpus = next(s for s in node if s["spec"]["driver"] == "gpu.nvidia.com")["spec"]["devices"]
    nics = next(s for s in node if s["spec"]["driver"] == "dra.net")["spec"]["devices"]
    numa = Counter(d["attributes"][NUMA]["int"] for d in gpus)
    roots = Counter(d["attributes"][ROOT]["string"] for d in gpus)
    assert numa == {0: 4, 1: 4} and len(roots) == 4 and set(roots.values()) == {2}
    assert len(nics) == 8 and all(n["attributes"]["dra.net/rdma"] == {"bool": True} for n in nics)
    for gpu, nic in zip(gpus, nics, strict=True):
        assert nic["attributes"][ROOT] == gpu["attributes"][ROOT]
        assert nic["attributes"][NUMA] == gpu["attributes"][NUMA] == nic["attributes"]["dra.net/numaNode"]
    assert all(s["spec"]["driver"] == "gpu.nvidia.com" for s in catalog_resource_slices(models=["H100_80GB"]))


def _eight_gpu_template(constraints: list[dict[str, Any]] | None = None, count: int = 8) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": [{"name": "gpus", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": count,
        "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].architecture == 'Hopper' && "
                                             "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('79Gi')) "
                                             ">= 0"}}]}}]}
    if constraints is not None:
        devices["constraints"] = constraints
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "train", "namespace": "ml"}, "spec": {"spec": {"devices": devices}}}


def test_audit_flags_an_unaligned_eight_gpu_claim_and_not_an_aligned_one() -> None:
    unaligned = audit([_eight_gpu_template()], kubernetes_version="1.34")
    hits = [f for f in unaligned.findings if f.rule == "DRA016"]
    assert len(hits) == 1 and hits[0].severity.value == "warning" and "8 whole GPUs" in hits[0].message
    assert "matchAttribute" in hits[0].fix
    for attribute in (NUMA, ROOT):
        aligned = audit([_eight_gpu_template([{"matchAttribute": attribute}])], kubernetes_version="1.34")
        assert "DRA016" not in {f.rule for f in aligned.findings}
    other = audit([_eight_gpu_template([{"matchAttribute": "gpu.nvidia.com/productName"}])], kubernetes_version="1.34")
    assert "DRA016" in {f.rule for f in other.findings}
    single = audit([_eight_gpu_template(count=1)], kubernetes_version="1.34")
    assert "DRA016" not in {f.rule for f in single.findings}


def test_dra007_says_what_replaces_wait_for_first_consumer() -> None:
    template = _eight_gpu_template([{"matchAttribute": NUMA}])
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] = "WaitForFirstConsumer"
    finding = next(f for f in audit([template], kubernetes_version="1.34").findings if f.rule == "DRA007")
    assert "first pod that uses it, on that pod's node" in finding.message
    assert "pins them all to the node of the first" in finding.message
    assert "matchAttribute" in finding.fix and "Alignment" in finding.fix


def test_audit_leaves_another_vendors_placement_constraint_alone() -> None:
    amd = _eight_gpu_template([{"distinctAttribute": "gpu.amd.com/deviceID"}])
    amd["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "gpu.amd.com"
    assert "DRA016" not in {f.rule for f in audit([amd], kubernetes_version="1.34").findings}
    amd["spec"]["spec"]["devices"]["constraints"] = []
    assert "DRA016" in {f.rule for f in audit([amd], kubernetes_version="1.34").findings}
