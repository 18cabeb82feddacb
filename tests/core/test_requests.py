from __future__ import annotations

from typing import Any

import pytest

from dra_constructs import CustomRequest, DraConstructsError, GpuRequest, MatchAttribute, MigRequest, Target
from dra_constructs.requests import render_claim_spec


def render(requests: list[Any], version: str = "1.32", constraints: list[MatchAttribute] | None = None) -> Any:
    spec, _ = render_claim_spec(requests, constraints or [], Target.parse(version), "test/claim")
    return spec


def test_v1beta1_requests_are_flat() -> None:
    request = render([MigRequest(gpu="A100_80GB", profile="3g.40gb")])["devices"]["requests"][0]
    assert request["deviceClassName"] == "mig.nvidia.com"
    assert request["allocationMode"] == "ExactCount" and request["count"] == 1
    assert "exactly" not in request


@pytest.mark.parametrize("version", ["1.33", "1.34", "1.36"])
def test_newer_targets_wrap_requests_in_exactly(version: str) -> None:
    request = render([GpuRequest(models=("H100_80GB",), count=2)], version)["devices"]["requests"][0]
    assert set(request) == {"name", "exactly"}
    assert request["exactly"]["count"] == 2 and request["exactly"]["deviceClassName"] == "gpu.nvidia.com"


def test_mig_selectors_pin_profile_and_architecture_with_real_api_forms() -> None:
    request = render([MigRequest(gpu="H100_80GB", profile="1g.10gb")])["devices"]["requests"][0]
    expressions = [s["cel"]["expression"] for s in request["selectors"]]
    assert "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'" in expressions
    assert "device.attributes['gpu.nvidia.com'].architecture == 'Hopper'" in expressions


def test_gpu_selectors_use_compare_to_and_semver() -> None:
    request = render([GpuRequest(min_memory="40Gi", min_compute_capability="8.0")])["devices"]["requests"][0]
    expressions = [s["cel"]["expression"] for s in request["selectors"]]
    assert "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0" in expressions
    assert ("device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('8.0.0')) >= 0"
            in expressions)
    assert not any(">= quantity" in e or ">= semver" in e for e in expressions)


def test_user_selectors_are_appended() -> None:
    user = "device.attributes['gpu.nvidia.com'].productName.lowerAscii().contains('h100')"
    request = render([GpuRequest(models=("H100_80GB",), selectors=(user,))])["devices"]["requests"][0]
    assert request["selectors"][-1] == {"cel": {"expression": user}}


def test_constraints_render_and_reference_requests() -> None:
    spec = render([MigRequest(name="a", gpu="A100_40GB", profile="1g.5gb"),
                   MigRequest(name="b", gpu="A100_40GB", profile="2g.10gb")],
                  constraints=[MatchAttribute(attribute="gpu.nvidia.com/parentUUID", requests=("a", "b"))])
    assert spec["devices"]["constraints"] == [{"matchAttribute": "gpu.nvidia.com/parentUUID", "requests": ["a", "b"]}]


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: render([MigRequest(gpu="A100_80GB", profile="3g.40gb", count=0)]), "count"),
        (lambda: render([MigRequest(name="Bad_Name", gpu="A100_80GB", profile="3g.40gb")]), "name"),
        (lambda: render([GpuRequest()]), "requests['gpu']"),
        (lambda: render([GpuRequest(min_memory="forty gigs")]), "min_memory"),
        (lambda: render([GpuRequest(min_memory="40Gi", min_compute_capability="nine")]), "min_compute_capability"),
        (lambda: render([MigRequest(gpu="A100_80GB", profile="1g.5gb")]), "profile"),
        (lambda: render([MigRequest(gpu="A30", profile="1g.6gb"), MigRequest(gpu="A30", profile="2g.12gb")]),
         "requests[].name"),
        (lambda: render([]), "requests"),
        (lambda: render([MigRequest(name=f"r{i}", gpu="A30", profile="1g.6gb") for i in range(33)]), "requests"),
        (lambda: render([GpuRequest(min_memory="1Gi", selectors=("true",) * 32)]), "selectors"),
        (lambda: render([GpuRequest(min_memory="1Gi", selectors=("x" * 10241,))]), "selectors"),
        (lambda: render([MigRequest(gpu="A30", profile="1g.6gb")],
                        constraints=[MatchAttribute(attribute="parentUUID")]), "constraints[].attribute"),
        (lambda: render([MigRequest(gpu="A30", profile="1g.6gb")],
                        constraints=[MatchAttribute(attribute="gpu.nvidia.com/parentUUID", requests=("x",))]),
         "constraints[].requests"),
        (lambda: render([CustomRequest(name="m", device_class_name="gpu.nvidia.com",
                                       selectors=("device.attributes['gpu.nvidia.com'].profile == '1g.5gb'",))]),
         "device_class_name"),
        (lambda: render([CustomRequest(name="m", device_class_name="gpu.nvidia.com", allocation_mode="All")]),
         "allocation_mode"),
        (lambda: MigRequest(gpu="A100_81GB", profile="3g.40gb"), "gpu"),
        (lambda: GpuRequest(models=("H100_80GB",), colour="red"), "colour"),
    ],
)
def test_bad_input_names_field_and_fix(make: Any, field: str) -> None:
    with pytest.raises(DraConstructsError) as info:
        make()
    assert field in info.value.field
    assert "Fix:" in str(info.value)


def test_admin_access_all_devices_is_allowed_for_agents() -> None:
    request = CustomRequest(name="all", device_class_name="gpu.nvidia.com", allocation_mode="All", admin_access=True)
    rendered = render([request], "1.34")["devices"]["requests"][0]["exactly"]
    assert rendered == {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All", "adminAccess": True}


def test_device_tolerations_from_1_33() -> None:
    from dra_constructs import DeviceToleration

    request = GpuRequest(models=("H100_80GB",), tolerations=(
        DeviceToleration(key="example.com/maintenance", operator="Exists", effect="NoSchedule"),))
    rendered = render([request], "1.34")["devices"]["requests"][0]["exactly"]
    assert rendered["tolerations"] == [{"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}]
    with pytest.raises(DraConstructsError, match=r"from Kubernetes 1\.33"):
        render([request], "1.32")
    with pytest.raises(DraConstructsError, match="takes no value"):
        render([GpuRequest(models=("A30",), tolerations=(DeviceToleration(key="k", operator="Exists", value="v"),))],
               "1.33")
