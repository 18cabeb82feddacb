"""Tenant quotas and Kueue mappings on AMD DeviceClasses (issue 26 item 5)."""

from __future__ import annotations

import cdk8s
import pytest
from core.helpers import validate_any_schema

from dra_constructs import AmdGpu, AmdPartition, DraConstructsError, Target, set_kubernetes_version
from dra_constructs.cel import check, match_devices
from dra_constructs.selector_checks import catalog_inventory
from dra_constructs.tenants import GpuTenant, KueueQueue, TenantPlatform, device_class_for


def _matching(selectors: tuple[str, ...]) -> set[str]:
    devices = [d.device for d in catalog_inventory().devices]
    results = match_devices(list(selectors), [], devices, Target.parse("1.34"))
    return {device for device, value in results.items() if value is True}


def test_amd_classes_select_exactly_their_profile_or_model() -> None:
    cpx = device_class_for(AmdPartition("MI300X", "cpx_nps4"))
    assert cpx.name == "mi300x-cpx-nps4.amd.dra-constructs.io" and cpx.catalog_class == "gpu.amd.com"
    assert all(check(e, "1.34").verdict == "OK" for e in cpx.selectors)
    matched = _matching(cpx.selectors)
    assert len(matched) == 64
    assert all(m.startswith("gpu.amd.com/catalog-amd-mi300x-cpx-nps4/") for m in matched), sorted(matched)[:3]
    whole = _matching(device_class_for(AmdGpu("MI325X")).selectors)
    assert len(whole) == 8 and all(m.startswith("gpu.amd.com/catalog-amd-mi325x-spx-nps1/") for m in whole)
    with pytest.raises(DraConstructsError, match="supports"):
        device_class_for(AmdPartition("MI300X", "dpx_nps4"))
    with pytest.raises(DraConstructsError, match="type amdgpu"):
        device_class_for(AmdPartition("MI300X", "spx_nps1"))


def test_amd_tenant_quota_kueue_and_claims() -> None:
    app = cdk8s.App()
    set_kubernetes_version(app, "1.34")
    chart = cdk8s.Chart(app, "platform")
    platform = TenantPlatform(chart, "tenants", flavor="mi300x-cpx")
    key = AmdPartition("MI300X", "cpx_nps4")
    tenant = GpuTenant(chart, "team-a", quotas={key: 4}, kueue=KueueQueue(cohort="amd"), platform=platform)
    apps = cdk8s.Chart(app, "apps", namespace=tenant.namespace)
    claim = tenant.claim_template(apps, "cpx", key, count=2)
    docs = [*chart.to_json(), *apps.to_json()]
    for doc in docs:
        validate_any_schema(doc, "1.34")
    quota = next(d for d in docs if d["kind"] == "ResourceQuota")["spec"]["hard"]
    assert quota["mi300x-cpx-nps4.amd.dra-constructs.io.deviceclass.resource.k8s.io/devices"] == "4"
    assert quota["gpu.amd.com.deviceclass.resource.k8s.io/devices"] == "0"  # the driver's class is closed
    classes = {d["metadata"]["name"] for d in docs if d["kind"] == "DeviceClass"}
    assert "mi300x-cpx-nps4.amd.dra-constructs.io" in classes
    mapping = platform.kueue_configuration()["resources"]["deviceClassMappings"]
    assert {"name": "dra-constructs.io/amd-mi300x-cpx-nps4",
            "deviceClassNames": ["mi300x-cpx-nps4.amd.dra-constructs.io"]} in mapping
    request = claim.to_json()["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert request["deviceClassName"] == "mi300x-cpx-nps4.amd.dra-constructs.io" and request["count"] == 2
    with pytest.raises(DraConstructsError, match="no node"):  # 64 partitions on the catalog's MI300X CPX node
        tenant.claim_template(apps, "too-many", key, count=65)
