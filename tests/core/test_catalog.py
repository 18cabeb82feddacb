from __future__ import annotations

import pytest

from dra_constructs import DraConstructsError, GpuModel
from dra_constructs.catalog import (
    DEVICE_CLASS_SELECTORS,
    GPU_SPECS,
    MIG_ATTRIBUTES,
    catalog_resource_slices,
    gpu_spec,
    mig_profile,
)

REQUIRED = {"A30", "A100_40GB", "A100_80GB", "H100_80GB", "H100_NVL_94GB", "H200_141GB", "B200_180GB"}


def test_required_models_are_in_the_catalog() -> None:
    assert {spec.key for spec in GPU_SPECS} >= REQUIRED
    assert {m.value for m in GpuModel} == {spec.key for spec in GPU_SPECS}


@pytest.mark.parametrize(
    ("model", "profile", "count"),
    [("A100_80GB", "3g.40gb", 2), ("H100_80GB", "1g.10gb", 7), ("H200_141GB", "3g.71gb", 2),
     ("A30", "1g.6gb", 4), ("A100_40GB", "1g.5gb", 7), ("B200_180GB", "7g.180gb", 1),
     ("H100_NVL_94GB", "3g.47gb", 2)],
)
def test_profiles_and_max_counts(model: str, profile: str, count: int) -> None:
    assert mig_profile(model, profile).max_count == count


def test_nvml_totals_are_below_marketing_where_measured() -> None:
    # The driver publishes NVML totals: an H100 80GB is 79.65 GiB, so "80Gi" would exclude it.
    assert GpuModel.H100_80GB.spec.memory_bytes < 80 * 1024**3
    assert GpuModel.H200_141GB.spec.memory_mib == 143771
    assert GpuModel.A100_80GB.spec.memory_mib == 81920


def test_memory_slices_fit_the_gpu() -> None:
    for spec in GPU_SPECS:
        total = 4 if spec.key == "A30" else 8
        for profile in spec.mig_profiles:
            assert 1 <= profile.memory_slices <= total
            assert profile.memory_mib < spec.memory_mib
            if not profile.media_extensions:
                assert profile.max_count * profile.memory_slices <= total


def test_unknown_model_and_profile_suggest_fixes() -> None:
    with pytest.raises(DraConstructsError, match="did you mean 'H100_80GB'"):
        gpu_spec("H100_80G")
    with pytest.raises(DraConstructsError, match=r"3g\.40gb"):
        mig_profile("A100_80GB", "3g.20gb")


def test_synthetic_slices_are_shaped_like_the_driver() -> None:
    slices = catalog_resource_slices(["A100_40GB"])
    whole = slices[0]["spec"]["devices"]
    assert [d["name"] for d in whole][:2] == ["gpu-0", "gpu-1"]
    assert whole[0]["attributes"]["type"] == {"string": "gpu"}
    assert whole[0]["capacity"]["memory"] == {"value": "40960Mi"}
    mig = next(s for s in slices if s["spec"]["devices"][0]["attributes"]["type"]["string"] == "mig")
    device = mig["spec"]["devices"][0]
    assert device["name"].startswith("gpu-0-mig-")
    assert set(MIG_ATTRIBUTES) <= set(device["attributes"])
    assert device["attributes"]["parentUUID"]["string"].startswith("GPU-")
    assert all(len(s["spec"]["devices"]) <= 128 for s in slices)  # ResourceSliceMaxDevices


def test_v1beta1_slices_nest_under_basic() -> None:
    device = catalog_resource_slices(["A30"], resource_version="v1beta1")[0]["spec"]["devices"][0]
    assert set(device) == {"name", "basic"}
    assert "attributes" in device["basic"]


def test_device_class_selectors_match_the_helm_chart() -> None:
    assert DEVICE_CLASS_SELECTORS["mig.nvidia.com"].endswith(".type == 'mig'")
    assert DEVICE_CLASS_SELECTORS["gpu.nvidia.com"].startswith("device.driver == 'gpu.nvidia.com'")
