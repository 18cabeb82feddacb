"""Selectors evaluated as the scheduler does: matches, non-matches and run-time errors."""

from __future__ import annotations

import pytest

from dra_constructs.catalog import DEVICE_CLASS_SELECTORS
from dra_constructs.cel import (
    CelRuntimeError,
    Device,
    catalog_devices,
    evaluate,
    explain_no_match,
    match_devices,
    matches_per_pool,
)
from dra_constructs.errors import DraConstructsError

H100 = Device(
    driver="gpu.nvidia.com", pool="node-a", name="gpu-0",
    attributes={"type": {"string": "gpu"}, "productName": {"string": "NVIDIA H100 80GB HBM3"},
                "cudaComputeCapability": {"version": "9.0.0"}, "index": {"int": 3}, "mig": {"bool": False},
                "resource.kubernetes.io/pcieRoot": {"string": "pci0000:01"}},
    capacity={"memory": "81559Mi"},
)
EXAMPLE = Device("dra.example.com", "p", "d", {"name": {"bool": True}, "services": {"string": "asymetric"}},
                 {"name": "1Mi"})


@pytest.mark.parametrize("version", ["1.32", "1.34"])
@pytest.mark.parametrize(("expression", "expected"), [
    ("device.driver == 'gpu.nvidia.com'", True),
    ("device.attributes['gpu.nvidia.com'].type == 'gpu'", True),
    ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0", False),  # 79.65Gi
    ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('79Gi')) >= 0", True),
    ("device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('8.0.0')) >= 0", True),
    ("device.attributes['gpu.nvidia.com'].cudaComputeCapability == semver('9.0.0+x')", True),
    ("device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*h100.*$')", True),
    ("device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:01'", True),
    ("'other.example.com' in device.attributes", False),
    ("device.attributes['other.example.com'].size() == 0", True),  # unknown domain: empty map
    ("has(device.attributes.nope)", True),
    ("'profile' in device.attributes['gpu.nvidia.com'] && device.attributes['gpu.nvidia.com'].profile == 'x'", False),
    ("'9.0.0' == device.attributes['gpu.nvidia.com'].cudaComputeCapability", False),
    ("device.attributes['gpu.nvidia.com'].cudaComputeCapability in ['9.0.0', device.driver]", False),  # not a set
    ("device.attributes['gpu.nvidia.com'].cudaComputeCapability in [semver('9.0.0')]", True),
    ("device.attributes['gpu.nvidia.com'].index in [3.0, 4.5]", True),  # the set holds 3 as int too
    ("device.attributes['gpu.nvidia.com'].index == 3u", True),
    ("device.attributes['gpu.nvidia.com'].index > 2.5", True),
    ("device.capacity['gpu.nvidia.com'].memory.isInteger()", True),
    ("true || device.attributes['gpu.nvidia.com'].profile == 'x'", True),
    ("device.attributes['gpu.nvidia.com'].profile == 'x' && false", False),
])
def test_evaluate(version: str, expression: str, expected: bool) -> None:
    assert evaluate(expression, H100, version) is expected


@pytest.mark.parametrize(("expression", "message"), [
    ("device.attributes['gpu.nvidia.com'].cudaComputeCapability == '9.0.0'", "no such overload"),
    ("device.attributes['gpu.nvidia.com'].profile == '1g.5gb'", "no such key: profile"),
    # cel-go turns `x in [constants]` into a Go map lookup: a Semver is not hashable
    ("device.attributes['gpu.nvidia.com'].cudaComputeCapability in ['9.0.0']",
     "internal error: runtime error: hash of unhashable type cel.Semver"),
    ("device.attributes['no-such-domain'].noSuchAttr.isGreaterThan(quantity('0'))", "no such key: noSuchAttr"),
    ("device.attributes['no-such-domain']['noSuchAttr'].isGreaterThan(quantity('0'))", "no such key: noSuchAttr"),
    ("sign(quantity(device.attributes['gpu.nvidia.com'].productName)) == 1", "quantities must match"),
    ("device.attributes['gpu.nvidia.com'].productName.startsWith('N') && "
     "1 / (device.attributes['gpu.nvidia.com'].index - 3) == 1", "division by zero"),
])
def test_runtime_errors_are_errors_not_no_match(expression: str, message: str) -> None:
    with pytest.raises(CelRuntimeError, match=message):
        evaluate(expression, H100, "1.32")


def test_upstream_runtime_cases() -> None:
    assert evaluate('cel.bind(dra, device.attributes["dra.example.com"], dra.name)', EXAMPLE, "1.32")
    assert evaluate('device.attributes["dra.example.com"].services.matches("[^a]?sym")', EXAMPLE, "1.32")
    assert evaluate('device.attributes["dra.example.com"].exists_one(x, x == "services")', EXAMPLE, "1.32")
    assert evaluate('device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))', EXAMPLE, "1.34")
    assert evaluate('"dra.example.com" in device.attributes', EXAMPLE, "1.32")


def test_bad_version_attribute_fails_every_selector() -> None:
    broken = Device("gpu.nvidia.com", "p", "bad", {"driverVersion": {"version": "570"}}, {})
    with pytest.raises(CelRuntimeError, match="parse semantic version"):
        evaluate("true", broken, "1.32")


def test_not_ok_expression_is_an_input_error() -> None:
    with pytest.raises(DraConstructsError):
        evaluate("device.capacity['x'].memory >= quantity('1')", H100, "1.32")


def test_match_devices_class_first_and_errors_reported() -> None:
    devices = catalog_devices()
    gpu_class = [DEVICE_CLASS_SELECTORS["gpu.nvidia.com"]]
    results = match_devices(gpu_class, ["device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"], devices)
    assert len(results) == len(devices)
    errors = [v for v in results.values() if isinstance(v, str)]
    assert errors and all(v == "error: no such key: profile" for v in errors)
    assert not any(v is True for v in results.values())  # MIG devices fail the class selector first
    mig = match_devices([DEVICE_CLASS_SELECTORS["mig.nvidia.com"]],
                        ["device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"], devices)
    assert sum(v is True for v in mig.values()) == 56  # A100 40GB: 7 per GPU x 8 GPUs
    per_pool = matches_per_pool([DEVICE_CLASS_SELECTORS["mig.nvidia.com"]],
                                ["device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"], devices)
    assert per_pool["gpu.nvidia.com/catalog-a100-40gb-1g5gb"] == 56


def test_explain_no_match() -> None:
    devices = catalog_devices()
    gpu_class = [DEVICE_CLASS_SELECTORS["gpu.nvidia.com"]]
    mig_profile = explain_no_match(gpu_class, ["device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"],
                                   devices, device_class="gpu.nvidia.com")
    assert "no such key: profile" in mig_profile and "mig.nvidia.com" in mig_profile
    too_big = explain_no_match(gpu_class, [
        "device.attributes['gpu.nvidia.com'].architecture == 'Hopper' && "
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('1Ti')) >= 0"], devices)
    assert "memory.compareTo(quantity('1Ti')) >= 0` is false for all" in too_big
    many = explain_no_match(gpu_class, ["device.attributes['gpu.nvidia.com'].architecture == 'Hopper'"],
                            devices, count=9)
    assert "no single node has 9" in many
