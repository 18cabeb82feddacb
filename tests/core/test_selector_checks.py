"""Synth-time CEL checks and satisfiability of claim requests (the hook into dra_constructs.cel)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_constructs import CustomRequest, DraConstructsError, GpuClaimTemplate, GpuModel, GpuRequest, MigRequest
from dra_constructs.catalog import catalog_resource_slices
from dra_constructs.cel import devices_from_slices

from .helpers import new_chart, synth


def test_quantity_ordering_operator_is_refused_with_position_and_fix() -> None:
    chart = new_chart(chart_id="team")
    with pytest.raises(DraConstructsError) as info:
        GpuClaimTemplate.whole_gpus(chart, "gpu", models=[GpuModel.H100_80GB],
                                    selectors=["device.capacity['gpu.nvidia.com'].memory >= quantity('40Gi')"])
    message = str(info.value)
    assert info.value.path == "team/gpu" and "requests['gpu'].selectors" in info.value.field
    assert "Invalid" in message and "<input>:1:42" in message and "compareTo" in info.value.fix


def test_version_compared_to_string_is_a_runtime_error_not_a_no_match() -> None:
    with pytest.raises(DraConstructsError) as info:
        GpuClaimTemplate.whole_gpus(new_chart(), "gpu", models=[GpuModel.H100_80GB], selectors=[
            "device.attributes['gpu.nvidia.com'].cudaComputeCapability == '9.0.0'"])
    assert "run-time error" in info.value.problem and "semver" in info.value.fix


def test_memory_bound_above_nvml_total_is_unsatisfiable() -> None:
    # An H100 80GB reports 79.65 GiB: "at least 80Gi" matches no H100 80GB.
    with pytest.raises(DraConstructsError) as info:
        GpuClaimTemplate(new_chart(), "gpu", requests=[
            GpuRequest(models=(GpuModel.H100_80GB,), min_memory="80Gi")])
    assert "80Gi" in info.value.problem and "no node of the inventory" in info.value.problem
    GpuClaimTemplate(new_chart(), "ok", requests=[GpuRequest(models=(GpuModel.H100_80GB,), min_memory="79Gi")])


def test_count_must_fit_on_one_node() -> None:
    chart = new_chart()
    GpuClaimTemplate.mig(chart, "fits", gpu="A100_80GB", profile="3g.40gb", count=16)  # 8 GPUs x 2
    with pytest.raises(DraConstructsError, match="count=17"):
        GpuClaimTemplate.mig(chart, "too-many", gpu="A100_80GB", profile="3g.40gb", count=17)


def test_custom_inventory_from_resource_slices() -> None:
    only_a30 = devices_from_slices(catalog_resource_slices(["A30"], gpus_per_node=1))
    chart = new_chart()
    GpuClaimTemplate.mig(chart, "a30", gpu="A30", profile="1g.6gb", count=4, inventory=only_a30)
    with pytest.raises(DraConstructsError, match="no node of the inventory"):
        GpuClaimTemplate.mig(chart, "a100", gpu="A100_40GB", profile="1g.5gb", inventory=only_a30)
    # without an inventory only the API-server checks run
    GpuClaimTemplate.mig(chart, "unchecked", gpu="A100_40GB", profile="1g.5gb", inventory=None)
    assert len(synth(chart)) == 2


def test_profile_selector_on_the_gpu_class_is_refused() -> None:
    with pytest.raises(DraConstructsError, match=r"mig\.nvidia\.com"):
        GpuClaimTemplate(new_chart(), "bad", requests=[CustomRequest(
            name="slice", device_class_name="gpu.nvidia.com",
            selectors=("device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",))])


@pytest.mark.parametrize("version", ["1.32", "1.34"])
def test_every_catalog_pin_is_accepted_and_satisfiable(version: str) -> None:
    chart = new_chart(version)
    for model in GpuModel:
        GpuClaimTemplate.whole_gpus(chart, f"{model.value.lower().replace('_', '-')}", models=[model])
        for profile in model.spec.mig_profiles:
            GpuClaimTemplate(chart, f"{model.value}-{profile.name}".lower().replace("_", "-").replace(".", "-")
                             .replace("+", "-"), requests=[MigRequest(gpu=model, profile=profile.name)])
    assert len(synth(chart)) == len(GpuModel) + sum(len(m.spec.mig_profiles) for m in GpuModel)


def test_model_pins_select_exactly_that_model() -> None:
    from dra_constructs.catalog import DEVICE_CLASS_SELECTORS
    from dra_constructs.cel import match_devices
    from dra_constructs.cel.builder import gpu_model_selectors

    devices = devices_from_slices(catalog_resource_slices(gpus_per_node=1))
    for model in GpuModel:
        results = match_devices([DEVICE_CLASS_SELECTORS["gpu.nvidia.com"]], gpu_model_selectors([model.spec]),
                                devices, "1.32")
        matched = {key.split("/")[1] for key, value in results.items() if value is True}
        assert matched == {f"catalog-{model.value.lower().replace('_', '-')}"}, model


def test_app_wide_inventory_from_resource_slice_files(tmp_path: Path) -> None:
    import yaml

    from dra_constructs import set_inventory

    slices = tmp_path / "slices.yaml"
    slices.write_text(yaml.safe_dump_all(catalog_resource_slices(["H200_141GB"], resource_version="v1beta1")))
    chart = new_chart()
    set_inventory(chart.node.root, slices)  # type: ignore[arg-type]
    GpuClaimTemplate.mig(chart, "h200", gpu="H200_141GB", profile="3g.71gb")
    with pytest.raises(DraConstructsError, match="no node of the inventory"):
        GpuClaimTemplate.mig(chart, "a100", gpu="A100_80GB", profile="3g.40gb")
    # a template's own inventory= wins over the App's
    GpuClaimTemplate.mig(chart, "a100-unchecked", gpu="A100_80GB", profile="3g.40gb", inventory=None)


def test_app_wide_inventory_off() -> None:
    from dra_constructs import set_inventory

    chart = new_chart()
    set_inventory(chart.node.root, None)  # type: ignore[arg-type]
    GpuClaimTemplate(chart, "anything", requests=[GpuRequest(models=(GpuModel.H100_80GB,), min_memory="80Gi")])
    with pytest.raises(DraConstructsError, match="Invalid"):  # the CEL checks still run
        GpuClaimTemplate.whole_gpus(chart, "bad", models=[GpuModel.A30],
                                    selectors=["device.capacity['gpu.nvidia.com'].memory >= quantity('1Gi')"])
