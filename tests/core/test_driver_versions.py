"""Alignments the cluster's NVIDIA DRA driver release cannot meet are refused (issue 22 item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dra_constructs import (
    Alignment,
    DraConstructsError,
    GpuClaimTemplate,
    GpuModel,
    GpuRequest,
    MigRequest,
    NicRequest,
    set_nvidia_driver_version,
)
from dra_constructs.catalog import catalog_resource_slices
from dra_constructs.catalog.driver_versions import DEFAULT_NVIDIA_DRIVER, nvidia_driver_release

from .helpers import new_chart

H100 = (GpuModel.H100_80GB,)


def _gpus(count: int = 4) -> list[GpuRequest]:
    return [GpuRequest(name="gpus", count=count, models=H100)]


def test_released_drivers_publish_no_numa_node_so_numa_alignment_is_refused() -> None:
    chart = new_chart("1.34")  # no setting: the newest release
    with pytest.raises(DraConstructsError) as info:
        GpuClaimTemplate(chart, "numa", requests=_gpus(), align=[Alignment(on="numaNode")])
    assert info.value.field == "align[0].on" and info.value.value == "numaNode"
    assert "v0.4 publishes no resource.kubernetes.io/numaNode" in str(info.value)
    assert "set_nvidia_driver_version" in info.value.fix and "set_inventory" in info.value.fix
    assert DEFAULT_NVIDIA_DRIVER.name == "v0.4"


@pytest.mark.parametrize("version", ["25.3", "v25.8.0", "0.3", "26.4", "0.4.1"])
def test_every_release_refuses_numa_and_accepts_pcie_root(version: str) -> None:
    chart = new_chart("1.34")
    set_nvidia_driver_version(chart, version)
    with pytest.raises(DraConstructsError, match="numaNode"):
        GpuClaimTemplate(chart, "numa", requests=_gpus(), align=[Alignment(on="numaNode")])
    GpuClaimTemplate(chart, "root", requests=[*_gpus(1), NicRequest(rdma=True)], align=[Alignment(on="pcieRoot")])


def test_main_publishes_numa_node() -> None:
    chart = new_chart("1.34")
    set_nvidia_driver_version(chart, "main")
    GpuClaimTemplate(chart, "numa", requests=_gpus(), align=[Alignment(on="numaNode")])


def test_dynamic_mig_devices_have_no_pcie_root() -> None:
    chart = new_chart("1.36")
    slices = [MigRequest(name="a", gpu="H100_80GB", profile="1g.10gb"), NicRequest(rdma=True)]
    with pytest.raises(DraConstructsError, match="DynamicMIG devices"):
        GpuClaimTemplate(chart, "dyn", requests=slices, align=[Alignment(on="pcieRoot")], mig_mode="dynamic")
    GpuClaimTemplate(chart, "static", requests=slices, align=[Alignment(on="pcieRoot")], mig_mode="static")


def test_only_nvidia_requests_are_judged_by_the_nvidia_release() -> None:
    chart = new_chart("1.34")
    GpuClaimTemplate(chart, "nics", requests=[NicRequest(count=2)], align=[Alignment(on="numaNode")])


def test_the_cluster_slices_decide_when_given(tmp_path: Path) -> None:
    # Own ResourceSlices (here the catalog's, which publish numaNode): the fit check sees the attribute,
    # whatever release is assumed.
    path = tmp_path / "slices.yaml"
    path.write_text(yaml.safe_dump_all(catalog_resource_slices(resource_version="v1", network=True)))
    chart = new_chart("1.34")
    GpuClaimTemplate(chart, "numa", requests=_gpus(), align=[Alignment(on="numaNode")], inventory=path)


def test_versions_parse_and_unknown_ones_are_named() -> None:
    assert nvidia_driver_release("v25.12.0", "t").name == "v25.12"
    assert nvidia_driver_release("0.2", "t").name == "v25.8"
    assert nvidia_driver_release("HEAD", "t").name == "main"
    for bad in ("0.5", "banana", "24.9"):
        with pytest.raises(DraConstructsError, match="not a known NVIDIA DRA driver release") as info:
            nvidia_driver_release(bad, "t")
        assert "'main'" in info.value.fix
    chart = new_chart("1.34")
    GpuClaimTemplate(chart, "x", requests=_gpus(1))
    with pytest.raises(DraConstructsError, match="set_nvidia_driver_version"):
        set_nvidia_driver_version(chart, "main")  # the chart already has children


def test_catalog_slices_as_a_release_publishes_them(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "dra_constructs.cli", "catalog", "--gpu", "H100_80GB",
                          "--resource-slices", "v1", "--network", "--nvidia-driver-version", "25.8"],
                         check=True, capture_output=True, text=True).stdout
    slices = list(yaml.safe_load_all(out))
    gpus = [d for s in slices if s["spec"]["driver"] == "gpu.nvidia.com" for d in s["spec"]["devices"]]
    nics = [d for s in slices if s["spec"]["driver"] == "dra.net" for d in s["spec"]["devices"]]
    assert gpus and all("resource.kubernetes.io/numaNode" not in d["attributes"] for d in gpus)
    assert all("resource.kubernetes.io/pcieRoot" in d["attributes"] for d in gpus)
    assert nics and all("resource.kubernetes.io/numaNode" in d["attributes"] for d in nics)  # DraNet is not modelled
    everything = catalog_resource_slices(models=["H100_80GB"], network=True)
    assert all("resource.kubernetes.io/numaNode" in d["attributes"]
               for s in everything if s["spec"]["driver"] == "gpu.nvidia.com" for d in s["spec"]["devices"])
    dynamic = catalog_resource_slices(models=["H100_80GB"], resource_version="v1", mig_mode="dynamic",
                                      nvidia_driver="0.4")
    placements = [d for s in dynamic for d in s["spec"].get("devices", [])
                  if d["attributes"]["type"]["string"] == "mig"]
    assert placements and all("resource.kubernetes.io/pcieRoot" not in d["attributes"] for d in placements)
    # those slices as the inventory: the fit check itself now refuses the NUMA alignment
    path = tmp_path / "slices.yaml"
    path.write_text(out)
    chart = new_chart("1.34")
    with pytest.raises(DraConstructsError, match="numaNode"):
        GpuClaimTemplate(chart, "numa", requests=_gpus(), align=[Alignment(on="numaNode")], inventory=path)
