"""MigSlices: a tenant's share of a GPU model in memory slices, counted by Kueue's counter-based quota.

Kueue's charge is reproduced from ``pkg/dra/counters.go`` (v0.19.2) by ``kueue_counter_charge`` and
run on the catalog's DynamicMIG ResourceSlices (what the NVIDIA driver publishes); the emitted
Configuration is checked against the hand-written schema of Kueue's types (``kueue_config_schema``),
the ClusterQueue against Kueue's CRD.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import cdk8s
import pytest
import yaml
from core.helpers import validate_any_schema

from dra_constructs import DraConstructsError, GpuModel, MigRequest, set_kubernetes_version
from dra_constructs.catalog import catalog_resource_slices
from dra_constructs.catalog.amd_devices import amd_resource_slices
from dra_constructs.cel import check
from dra_constructs.cel.inventory import devices_from_slices
from dra_constructs.cel.matching import match_devices
from dra_constructs.constructs.scope import set_mig_mode
from dra_constructs.tenants import GpuTenant, KueueQueue, Mig, MigSlices, TenantPlatform, WholeGpu
from dra_constructs.tenants.kueue import (
    device_class_mappings,
    kueue_configuration,
    kueue_counter_charge,
    kueue_inadmissible,
)
from dra_constructs.tenants.kueue_versions import KueueVersion
from dra_constructs.tenants.quota import device_class_for
from tenants.kueue_config_schema import validate_configuration

H100 = GpuModel.H100_80GB.spec
SLICES = device_class_for(MigSlices(GpuModel.H100_80GB))
COUNTER = SLICES.counter
assert COUNTER is not None


def _dynamic_devices() -> list[Any]:
    return devices_from_slices(catalog_resource_slices(mig_mode="dynamic", split_counter_sets=True))


def _charge(profile: str, count: int = 1) -> int | None:
    assert COUNTER is not None
    request = MigRequest(name="mig", gpu=GpuModel.H100_80GB, profile=profile, count=count,
                         device_class_name=SLICES.name)
    return kueue_counter_charge(COUNTER.counter, COUNTER.device_selector, SLICES.selectors,
                                request.generated_selectors("t"), count, _dynamic_devices())


def test_the_class_and_the_device_selector_take_every_mig_device_of_the_model_and_nothing_else() -> None:
    for expression in (*SLICES.selectors, COUNTER.device_selector):
        assert check(expression, "1.35").verdict == "OK", expression
    # Kueue evaluates deviceSelector on every device of the driver: it must never fail at run time.
    devices = _dynamic_devices() + devices_from_slices(catalog_resource_slices(mig_mode="static"))
    devices += devices_from_slices(amd_resource_slices())
    for selectors in ([COUNTER.device_selector], list(SLICES.selectors)):
        results = match_devices(selectors, [], devices, "1.35")
        assert not [v for v in results.values() if isinstance(v, str)]
        matched = {d for d, v in results.items() if v is True}
        expected = {d.id for d in devices if d.driver == "gpu.nvidia.com"
                    and (d.attribute("gpu.nvidia.com", "type") or {}).get("string") == "mig"
                    and (d.attribute("gpu.nvidia.com", "architecture") or {}).get("string") == "Hopper"
                    and (d.attribute("gpu.nvidia.com", "profile") or {}).get("string") in H100.profiles_by_name}
        assert matched == expected and any("h100-80gb" in d.lower() for d in matched)


def test_kueue_charges_each_profile_the_memory_its_placements_consume() -> None:
    for profile in H100.mig_profiles:
        assert _charge(profile.name) == profile.memory_mib * 2**20, profile.name
        assert _charge(profile.name, count=3) == 3 * profile.memory_mib * 2**20
    assert _charge("7g.80gb", count=10**6) is None  # fewer devices than the count: inadmissible


def test_a_slice_is_the_gpus_memory_over_its_slices_and_bounds_every_profile_of_every_model() -> None:
    from dra_constructs.catalog.data import GPU_SPECS

    assert COUNTER.slice_kib * 8 == H100.memory_mib * 1024
    for spec in GPU_SPECS:  # memory slices partition the GPU's memory: no profile holds more than its share
        counter = device_class_for(MigSlices(spec.key)).counter
        assert counter is not None
        for profile in spec.mig_profiles:
            assert profile.memory_mib * 1024 <= profile.memory_slices * counter.slice_kib, (spec.key, profile.name)


def test_the_sizes_nvidia_smi_reports_on_an_h100_fit_their_slices() -> None:
    """``nvidia-smi mig -lgip`` on an H100 80GB (jbarrow.ai/field_notes/nvidia-mig, 2026): GiB per profile.

    The catalog's estimate of 7g.80gb (98.125% of 81,559 MiB) is below the 79.25 GiB NVML reports:
    a quota built from per-profile estimates would refuse a real 7g.80gb at 8 slices.
    """
    reported = {"1g.10gb": 9.75, "1g.10gb+me": 9.75, "1g.20gb": 19.62, "2g.20gb": 19.62, "3g.40gb": 39.50,
                "4g.40gb": 39.50, "7g.80gb": 79.25}
    for name, gib in reported.items():
        slices = H100.profile(name).memory_slices
        assert gib * 2**20 <= COUNTER.nominal_kib(slices), name
    assert H100.profile("7g.80gb").memory_mib < 79.25 * 1024
    one = int(9.75 * 2**20)  # KiB of a 1g.10gb: the counter tells N slices of them from N+1 up to 47
    assert next(n for n in range(1, 60) if (n + 1) * one <= COUNTER.nominal_kib(n)) == 48


def test_the_quota_admits_every_mix_up_to_n_slices_and_no_mix_of_n_plus_one_up_to_18() -> None:
    profiles = sorted({(p.memory_slices, p.memory_mib * 1024) for p in H100.mig_profiles})
    for n in range(1, 25):
        quota = COUNTER.nominal_kib(n)
        assert (COUNTER.most_slices_within(quota) == n) is (n <= 18), n
        for size in range(1, n + 2):
            for mix in itertools.combinations_with_replacement(profiles, size):
                slices, memory = sum(s for s, _ in mix), sum(m for _, m in mix)
                if slices <= n:
                    assert memory <= quota, (n, mix)
                elif slices == n + 1 and n <= 18:
                    assert memory > quota, (n, mix)
    # The catalog's 1g.10gb is 95% of its share: past 18 slices the counter cannot tell N slices
    # of 1g.10gb from N+1 (documented in docs/tenants.md).
    assert COUNTER.most_slices_within(COUNTER.nominal_kib(64)) == 67


def _tenant_app(version: str = "1.36", **tenant: Any) -> tuple[cdk8s.App, GpuTenant, TenantPlatform]:
    app = cdk8s.Testing.app()
    set_kubernetes_version(app, version)
    if version == "1.35":
        set_mig_mode(app, "dynamic")
    chart = cdk8s.Chart(app, "platform")
    platform = TenantPlatform(chart, "shared", kueue_version=tenant.pop("kueue_version", None))
    kwargs: dict[str, Any] = {"quotas": {MigSlices(GpuModel.H100_80GB): 12}, "kueue": KueueQueue(borrowing_limit=2),
                              "platform": platform, **tenant}
    return app, GpuTenant(chart, "team-a", **kwargs), platform


def _docs(app: cdk8s.App) -> list[dict[str, Any]]:
    return [dict(d) for chart in app.charts for d in cdk8s.Testing.synth(chart)]


@pytest.mark.parametrize("version", ["1.35", "1.36", "1.37"])
def test_a_slice_quota_emits_a_counter_mapping_a_memory_quota_and_a_device_cap(version: str) -> None:
    app, tenant, platform = _tenant_app(version)
    tenant.claim_template(cdk8s.Chart(app, "apps", namespace="team-a"), "big", Mig(GpuModel.H100_80GB, "3g.40gb"))
    docs = _docs(app)
    for doc in docs:
        validate_any_schema(doc, version)  # Kueue kinds against Kueue's CRDs
    [cq] = [d for d in docs if d["kind"] == "ClusterQueue"]
    [resource] = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert resource == {"name": "dra-constructs.io/h100-80gb-mig-memory",
                        "nominalQuota": f"{12 * 81559 * 128}Ki", "borrowingLimit": f"{2 * 81559 * 128}Ki"}
    [quota] = [d for d in docs if d["kind"] == "ResourceQuota"]
    assert quota["spec"]["hard"]["h100-80gb.mig.dra-constructs.io.deviceclass.resource.k8s.io/devices"] == "14"
    config = platform.kueue_configuration()
    validate_configuration(config)
    assert "featureGates" not in config  # counter sources are beta (on) in Kueue 0.19
    assert config["resources"]["deviceClassMappings"] == [{
        "name": "dra-constructs.io/h100-80gb-mig-memory", "deviceClassNames": ["h100-80gb.mig.dra-constructs.io"],
        "sources": [{"counter": {"name": "memory", "driver": "gpu.nvidia.com",
                                 "deviceSelector": {"cel": {"expression": COUNTER.device_selector}}}}]}]
    [config_map] = [d for d in docs if d["kind"] == "ConfigMap"]
    assert yaml.safe_load(config_map["data"]["deviceClassMappings.yaml"]) == config
    [template] = [d for d in docs if d["kind"] == "ResourceClaimTemplate"]
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["deviceClassName"] == "h100-80gb.mig.dra-constructs.io"
    assert list(kueue_inadmissible(template["spec"]["spec"])) == []
    assert kueue_counter_charge("memory", COUNTER.device_selector, SLICES.selectors,
                                [s["cel"]["expression"] for s in exactly["selectors"]], 1,
                                _dynamic_devices()) == H100.profile("3g.40gb").memory_mib * 2**20


def test_kueue_0_18_gets_the_alpha_gate_and_older_releases_are_refused() -> None:
    _, _, platform = _tenant_app(kueue_version="v0.18.6")
    config = platform.kueue_configuration()
    assert config["featureGates"] == {"KueueDRAIntegrationPartitionableDevices": True}
    validate_configuration(config)
    _, _, plain = _tenant_app(kueue_version="0.18", quotas={Mig(GpuModel.H100_80GB, "1g.10gb"): 2})
    assert "featureGates" not in plain.kueue_configuration()  # KueueDRAIntegration is beta (on) from 0.18
    for old in ("0.17", "0.14.2"):
        with pytest.raises(DraConstructsError, match=r"Kueue 0\.18-0\.19") as raised:
            _tenant_app(kueue_version=old)
        assert raised.value.field == "kueue_version" and "DynamicResourceAllocation" in str(raised.value)
    with pytest.raises(DraConstructsError, match="not a Kueue version"):
        KueueVersion.parse("1.0")


@pytest.mark.parametrize(("version", "tenant", "problem"), [
    ("1.36", {"kueue": None}, "without Kueue nothing would hold the tenant"),
    ("1.34", {}, "needs Kubernetes 1.35"),
    ("1.33", {"kueue": None}, "without Kueue"),
])
def test_a_slice_quota_is_refused_where_kueue_cannot_count_it(version: str, tenant: dict[str, Any],
                                                              problem: str) -> None:
    with pytest.raises(DraConstructsError, match=problem) as raised:
        _tenant_app(version, **tenant)
    assert raised.value.field.startswith("quotas[MigSlices(") and raised.value.fix


def test_static_mig_cannot_be_counted_in_slices() -> None:
    app = cdk8s.Testing.app()
    set_kubernetes_version(app, "1.35")  # static MIG is the default below 1.36
    chart = cdk8s.Chart(app, "p")
    with pytest.raises(DraConstructsError, match="consume none") as raised:
        GpuTenant(chart, "t", quotas={MigSlices(GpuModel.H100_80GB): 8}, kueue=KueueQueue())
    assert "set_mig_mode(app, 'dynamic')" in raised.value.fix
    app = cdk8s.Testing.app()
    set_kubernetes_version(app, "1.37")
    set_mig_mode(app, "static")
    with pytest.raises(DraConstructsError, match="consume none"):
        GpuTenant(cdk8s.Chart(app, "p"), "t", quotas={MigSlices(GpuModel.H100_80GB): 8}, kueue=KueueQueue())


def test_unknown_models_and_counter_sources_kueue_would_refuse() -> None:
    with pytest.raises(DraConstructsError, match="H100_80GB"):
        device_class_for(MigSlices("H101_80GB"))
    bad = dataclasses.replace(COUNTER, counter="Memory")
    with pytest.raises(DraConstructsError, match="DNS label"):
        device_class_mappings({"c": "x/y"}, counters={"x/y": bad})
    bad = dataclasses.replace(COUNTER, driver="g" * 64 + ".com")
    with pytest.raises(DraConstructsError, match="63 characters"):
        device_class_mappings({"c": "x/y"}, counters={"x/y": bad})


def test_mixed_tenants_share_one_configuration() -> None:
    app, _, platform = _tenant_app()
    GpuTenant(cdk8s.Chart(app, "other"), "team-b", platform=platform, kueue=KueueQueue(),
              quotas={Mig(GpuModel.H100_80GB, "1g.10gb"): 3, WholeGpu(GpuModel.H100_80GB): 1})
    config = platform.kueue_configuration()
    validate_configuration(config)
    assert [("sources" in m, m["name"]) for m in config["resources"]["deviceClassMappings"]] == [
        (False, "dra-constructs.io/h100-80gb-gpu"), (False, "dra-constructs.io/h100-80gb-mig-1g.10gb"),
        (True, "dra-constructs.io/h100-80gb-mig-memory")]


def test_kueue_0_19_admits_constraints_and_config_and_every_release_refuses_first_available() -> None:
    spec = {"devices": {"requests": [{"name": "a", "exactly": {"deviceClassName": "c"}}],
                        "constraints": [{"matchAttribute": "gpu.nvidia.com/parentUUID"}],
                        "config": [{"opaque": {"driver": "d", "parameters": {}}}]}}
    assert [p for p, _ in kueue_inadmissible(spec)] == ["spec.devices.constraints", "spec.devices.config"]
    assert list(kueue_inadmissible(spec, kueue_version="0.19")) == []
    first = {"devices": {"requests": [{"name": "a", "firstAvailable": [{"name": "x", "deviceClassName": "c"}]}]}}
    for version in ("0.18", "0.19"):
        assert [p for p, _ in kueue_inadmissible(first, kueue_version=version)] == [
            "spec.devices.requests[0].firstAvailable"]


def test_kueue_configuration_of_plain_mappings_is_unchanged() -> None:
    config = kueue_configuration(device_class_mappings({"c.example.com": "example.com/c"}))
    assert config == {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                      "resources": {"deviceClassMappings": [{"name": "example.com/c",
                                                             "deviceClassNames": ["c.example.com"]}]}}
    validate_configuration(config)
