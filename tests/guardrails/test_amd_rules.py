"""Guardrails on AMD GPUs: DRA009 counts AMD tenants as sanitized only by an AMD sanitizer; DRA018 (issue 26)."""

from __future__ import annotations

from typing import Any

from dra_constructs.guardrails import audit

from .helpers import claim_template, gpu_pod_spec, pod, rules_of

_TYPE = "device.attributes['gpu.amd.com'].type == 'amdgpu-partition'"
_PRODUCT = "device.attributes['gpu.amd.com'].productName == 'AMD_Instinct_MI300X_OAM'"
_PROFILE = "device.attributes['gpu.amd.com'].partitionProfile == 'cpx_nps4'"
_SANITIZER = {"apiVersion": "apps/v1", "kind": "DaemonSet",
              "metadata": {"name": "s", "namespace": "dra-system",
                           "labels": {"dra-constructs.io/component": "sanitizer"}},
              "spec": {"template": {"spec": {"containers": [{"name": "s"}]}}}}


def _amd_request(name: str = "partition", *selectors: str, count: int = 1) -> dict[str, Any]:
    return {"name": name, "exactly": {
        "deviceClassName": "gpu.amd.com", "allocationMode": "ExactCount", "count": count,
        "selectors": [{"cel": {"expression": s}} for s in (selectors or (_TYPE, _PRODUCT, _PROFILE))]}}


def _tenant(namespace: str, amd: bool = True) -> list[dict[str, Any]]:
    mig = "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"
    request = _amd_request() if amd else {
        "name": "gpu", "exactly": {"deviceClassName": "mig.nvidia.com", "allocationMode": "ExactCount", "count": 1,
                                   "selectors": [{"cel": {"expression": mig}}]}}
    return [claim_template([request], namespace=namespace, version="v1"),
            pod(gpu_pod_spec(), name="w", namespace=namespace)]


def _found(*objects: dict[str, Any], severity: str | None = "error") -> set[str]:
    return rules_of(audit(list(objects), kubernetes_version="1.34"), severity)


_AMD_SANITIZER = {**_SANITIZER, "metadata": {**_SANITIZER["metadata"], "name": "s-amd"},
                  "spec": {"template": {"metadata": {"labels": {"dra-constructs.io/sanitizer-vendor": "amd"}},
                                        "spec": {"containers": [{"name": "s"}]}}}}


def test_dra009_counts_amd_tenants_as_sanitized_only_by_an_amd_sanitizer() -> None:
    a, b = _tenant("tenant-a"), _tenant("tenant-b")
    assert "DRA009" in _found(*a, *b)
    # an NVIDIA-only sanitizer (no AMD backend on its pods): two AMD tenants stay unsanitized
    assert "DRA009" in _found(*a, *b, _SANITIZER)
    hits = [f for f in audit([*a, *b, _SANITIZER], kubernetes_version="1.34").findings if f.rule == "DRA009"]
    assert hits and all("runs the AMD backend" in f.message and "vendor='amd'" in f.message for f in hits)
    assert "DRA009" not in _found(*a, *b, _SANITIZER, _AMD_SANITIZER)
    assert "DRA009" not in _found(*a, *b, _AMD_SANITIZER)
    # NVIDIA tenants are covered; one AMD tenant among NVIDIA ones hands its AMD GPUs to nobody else
    assert "DRA009" not in _found(*_tenant("tenant-a", amd=False), *_tenant("tenant-b", amd=False), _SANITIZER)
    assert "DRA009" not in _found(*a, *_tenant("tenant-b", amd=False), _SANITIZER)


def test_dra009_counts_the_rocm_device_plugin_as_amd() -> None:
    legacy = [pod({"terminationGracePeriodSeconds": 60, "containers": [
        {"name": "c", "image": "rocm/pytorch:rocm6.4", "resources": {"limits": {"amd.com/gpu": 1}}}]},
        name="w", namespace=ns) for ns in ("tenant-a", "tenant-b")]
    assert "DRA009" in _found(*legacy, _SANITIZER)


def test_dra017_constraints_on_attributes_the_driver_does_not_publish() -> None:
    pair = [_amd_request("p0"), _amd_request("p1")]
    same_parent = claim_template(pair, version="v1", constraints=[
        {"matchAttribute": "gpu.amd.com/parentDeviceID", "requests": ["p0", "p1"]}])
    assert "DRA018" not in _found(same_parent, severity=None)
    for attribute in ("gpu.amd.com/deviceID", "gpu.amd.com/pciAddr", "resource.kubernetes.io/numaNode",
                      "gpu.amd.com/uuid"):
        claim = claim_template(pair, version="v1", constraints=[{"distinctAttribute": attribute}])
        assert "DRA018" in _found(claim), attribute
    whole = _amd_request("gpu", "device.attributes['gpu.amd.com'].type == 'amdgpu'", _PRODUCT, count=2)
    on_parent = claim_template([whole], version="v1", constraints=[{"matchAttribute": "gpu.amd.com/parentDeviceID"}])
    assert "DRA018" in _found(on_parent)
    on_root = claim_template([whole], version="v1", constraints=[{"matchAttribute": "resource.kubernetes.io/pcieRoot"}])
    assert "DRA018" not in _found(on_root, severity=None)


def test_dra017_selectors() -> None:
    unpublished = claim_template([_amd_request("p", _TYPE, _PRODUCT, "device.attributes['gpu.amd.com'].uuid == 'x'")],
                                 version="v1")
    assert "DRA018" in _found(unpublished)
    device_id = "device.attributes['gpu.amd.com'].deviceID == '1'"
    wrong_kind = claim_template([_amd_request("p", _TYPE, _PRODUCT, device_id)], version="v1")
    assert "DRA018" in _found(wrong_kind)
    unpinned = claim_template([_amd_request("p", _TYPE)], version="v1")
    assert "DRA018" in _found(unpinned, severity="warning")
    assert "DRA018" not in _found(claim_template([_amd_request()], version="v1"), severity=None)
