"""The construct-time satisfiability check runs the allocator (static or DynamicMIG inventory)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cdk8s
import pytest
import yaml

from dra_constructs import (
    DraConstructsError,
    GpuClaimTemplate,
    MatchAttribute,
    MigRequest,
    set_inventory,
    set_kubernetes_version,
    set_mig_mode,
)
from dra_constructs.catalog import catalog_resource_slices


def new_chart(version: str, mig_mode: str | None = None) -> cdk8s.Chart:
    app = cdk8s.Testing.app()
    set_kubernetes_version(app, version)
    if mig_mode is not None:
        set_mig_mode(app, mig_mode)
    return cdk8s.Chart(app, "test")


def synth(chart: cdk8s.Chart) -> list[dict[str, Any]]:
    return [dict(doc) for doc in cdk8s.Testing.synth(chart)]


@pytest.mark.parametrize("version", ["1.34", "1.36"])
def test_count_per_node_in_either_shape(version: str) -> None:
    chart = new_chart(version)  # 1.34: static catalog; 1.36: DynamicMIG (partitionable devices on by default)
    GpuClaimTemplate.mig(chart, "fits", gpu="A100_80GB", profile="3g.40gb", count=16)  # 8 GPUs x 2
    with pytest.raises(DraConstructsError, match="count=17"):
        GpuClaimTemplate.mig(chart, "too-many", gpu="A100_80GB", profile="3g.40gb", count=17)


def test_dynamic_mig_knows_that_placements_overlap(tmp_path: Path) -> None:
    slices = tmp_path / "slices.yaml"
    slices.write_text(yaml.safe_dump_all(catalog_resource_slices(
        ["A100_80GB"], gpus_per_node=1, mig_mode="dynamic", split_counter_sets=True)))
    chart = new_chart("1.36")
    set_inventory(chart.node.root, slices)  # type: ignore[arg-type]
    requests = [MigRequest(name="a", gpu="A100_80GB", profile="3g.40gb", count=2)]
    GpuClaimTemplate(chart, "two", requests=requests)
    with pytest.raises(DraConstructsError) as info:
        GpuClaimTemplate(chart, "three", requests=[*requests, MigRequest(name="b", gpu="A100_80GB",
                                                                         profile="1g.10gb")])
    assert "no node of the inventory" in info.value.problem and "counter" in info.value.problem
    assert info.value.field == "requests['b']"
    assert len(synth(chart)) == 1


def test_mig_mode_per_app_and_per_construct() -> None:
    chart = new_chart("1.34")
    constraint = [MatchAttribute(attribute="gpu.nvidia.com/parentUUID")]
    mixed = [MigRequest(name="a", gpu="A100_80GB", profile="4g.40gb"),
             MigRequest(name="b", gpu="A100_80GB", profile="3g.40gb")]
    # the static catalog has no node with both profiles, the request-by-request check accepts it
    GpuClaimTemplate(chart, "static", requests=mixed, constraints=constraint)
    GpuClaimTemplate(chart, "dynamic", requests=mixed, constraints=constraint, mig_mode="dynamic")
    with pytest.raises(DraConstructsError, match="mig_mode"):
        GpuClaimTemplate(new_chart("1.32"), "old", requests=mixed, mig_mode="dynamic")
    with pytest.raises(DraConstructsError, match="not a MIG inventory shape"):
        GpuClaimTemplate(chart, "bad", requests=mixed, mig_mode="partitioned")
    app_chart = new_chart("1.33", mig_mode="dynamic")
    with pytest.raises(DraConstructsError, match="count=57"):  # 8 GPUs x 7 placements of 1g.10gb
        GpuClaimTemplate.mig(app_chart, "many", gpu="A100_80GB", profile="1g.10gb", count=57)


def test_an_app_wide_inventory_stays_in_its_app(tmp_path: Path) -> None:
    only_a30 = tmp_path / "a30.yaml"
    only_a30.write_text(yaml.safe_dump_all(catalog_resource_slices(["A30"], gpus_per_node=1)))
    first = new_chart("1.34")
    set_inventory(first.node.root, only_a30)  # type: ignore[arg-type]
    with pytest.raises(DraConstructsError, match="no node of the inventory") as info:
        GpuClaimTemplate.mig(first, "h100", gpu="H100_80GB", profile="1g.10gb")
    # the fix speaks of what the user did: an inventory was passed, so not "or pass inventory="
    assert "pass inventory=" not in info.value.fix and "the inventory you passed" in info.value.fix
    with pytest.raises(DraConstructsError) as catalog:
        GpuClaimTemplate.mig(new_chart("1.34"), "many", gpu="H100_80GB", profile="7g.80gb", count=9)
    assert catalog.value.fix.endswith("or pass inventory= with your cluster's ResourceSlices")
    GpuClaimTemplate.mig(new_chart("1.34"), "h100", gpu="H100_80GB", profile="1g.10gb")  # another App: the catalog
