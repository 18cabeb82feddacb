"""Typed tenant quotas: keys -> DeviceClasses that select exactly the devices the key names."""

from __future__ import annotations

import pytest

from dra_constructs import DraConstructsError, GpuModel, Target
from dra_constructs.catalog import DEVICE_CLASS_SELECTORS
from dra_constructs.cel import check, match_devices
from dra_constructs.selector_checks import catalog_inventory
from dra_constructs.tenants import Mig, WholeGpu, device_class_for, resolve_quotas
from dra_constructs.tenants.quota import resource_quota_hard


def _matching(selectors: tuple[str, ...]) -> set[str]:
    results = match_devices(list(selectors), [], list(catalog_inventory()), Target.parse("1.34"))
    return {device for device, value in results.items() if value is True}


@pytest.mark.parametrize("key", [
    Mig(GpuModel.H100_80GB, "1g.10gb"), Mig(GpuModel.H100_80GB, "1g.10gb+me"), Mig("A100_80GB", "3g.40gb"),
    WholeGpu(GpuModel.H100_80GB), WholeGpu(GpuModel.B200_180GB),
])
def test_class_selectors_pass_the_checker_and_select_only_that_kind(key: Mig | WholeGpu) -> None:
    device_class = device_class_for(key)
    assert device_class.managed
    for expression in device_class.selectors:
        assert check(expression, "1.34").verdict == "OK", expression
    matched = _matching(device_class.selectors)
    assert matched, "the class must select catalog devices"
    spec = GpuModel(key.gpu).spec if key.gpu is not None else None
    assert spec is not None
    model = spec.key.lower().replace("_", "")
    assert all(model in device.replace("-", "").replace("_", "").lower() for device in matched), sorted(matched)[:5]
    if isinstance(key, Mig):
        part = spec.profile(key.profile).device_name_part
        assert all(f"-{part}-" in device or device.endswith(f"-{part}") or part in device for device in matched)
        # a neighbouring profile on the same GPU is not selected
        assert not matched & _matching(device_for_other_profile(spec.key, key.profile))


def device_for_other_profile(model: str, profile: str) -> tuple[str, ...]:
    other = "3g.40gb" if profile != "3g.40gb" else "1g.10gb"
    return device_class_for(Mig(model, other)).selectors


def test_names_and_resources() -> None:
    entries = resolve_quotas({Mig(GpuModel.H100_80GB, "1g.10gb+me"): 1, WholeGpu(GpuModel.H100_80GB): 2,
                              "mig.nvidia.com": 0, WholeGpu(): 3})
    names = [(c.name, c.kueue_resource, n) for c, n in entries]
    assert names == [
        ("gpu.nvidia.com", "dra-constructs.io/gpu.nvidia.com", 3),
        ("h100-80gb-1g.10gb-me.mig.dra-constructs.io", "dra-constructs.io/h100-80gb-mig-1g.10gb-me", 1),
        ("h100-80gb.gpu.dra-constructs.io", "dra-constructs.io/h100-80gb-gpu", 2),
        ("mig.nvidia.com", "dra-constructs.io/mig.nvidia.com", 0),
    ]
    assert entries[1][0].devices_resource == (
        "h100-80gb-1g.10gb-me.mig.dra-constructs.io.deviceclass.resource.k8s.io/devices")


@pytest.mark.parametrize(("quotas", "field", "problem"), [
    ({Mig(GpuModel.H100_80GB, "1g.11gb"): 1}, "profile", "did you mean '1g.10gb'"),
    ({Mig("H101_80GB", "1g.10gb"): 1}, "gpu", "H100_80GB"),
    ({WholeGpu("Z9"): 1}, "gpu", "not a GPU model"),
    ({"tpu.example.com": 1}, "quotas['tpu.example.com']", "not a DeviceClass the catalog knows"),
    ({Mig(GpuModel.H100_80GB, "1g.10gb"): -1}, "quotas", "whole number"),
    ({Mig(GpuModel.H100_80GB, "1g.10gb"): True}, "quotas", "whole number"),
    ({WholeGpu(): 1, "gpu.nvidia.com": 2}, "quotas", "already names"),
    ({3: 1}, "quotas[3]", "not a quota key"),
])
def test_unknown_keys_and_bad_counts_raise(quotas: dict, field: str, problem: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(DraConstructsError) as raised:
        resolve_quotas(quotas, "team-a")
    error = raised.value
    assert error.path == "team-a" and field in error.field
    assert problem in str(error) and error.fix


def test_quota_hard_closes_the_driver_classes_and_caps_extended_names_where_dra_backs_them() -> None:
    entries = resolve_quotas({Mig(GpuModel.H100_80GB, "1g.10gb"): 4})
    closed = tuple(sorted(DEVICE_CLASS_SELECTORS))
    hard_134 = resource_quota_hard(entries, Target.parse("1.34"), closed)
    assert hard_134 == {
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "0",
        "h100-80gb-1g.10gb.mig.dra-constructs.io.deviceclass.resource.k8s.io/devices": "4",
        "mig.nvidia.com.deviceclass.resource.k8s.io/devices": "0",
        "vfio.gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "0",
    }
    hard_136 = resource_quota_hard(entries, Target.parse("1.36"), closed)
    assert hard_136["requests.nvidia.com/gpu"] == "0"  # the driver's gpu.nvidia.com extendedResourceName
    assert hard_136["requests.deviceclass.resource.kubernetes.io/h100-80gb-1g.10gb.mig.dra-constructs.io"] == "4"
    assert hard_136["requests.deviceclass.resource.kubernetes.io/mig.nvidia.com"] == "0"


def test_target_decides_kueue_and_dra_backed_extended_resources() -> None:
    assert [Target.parse(f"1.{m}").supports_kueue_dra for m in range(32, 38)] == [False, False, True, True, True, True]
    assert [Target.parse(f"1.{m}").has_dra_extended_resources for m in range(32, 38)] == [
        False, False, False, False, True, True]
