"""Each rule: what it flags, and the nearest thing it must not flag."""

from __future__ import annotations

from typing import Any

import pytest

from dra_constructs.guardrails import RULES, RULES_BY_ID, audit
from dra_constructs.guardrails.manifest import Manifest
from dra_constructs.guardrails.rules.env_selection import selects_devices
from dra_constructs.guardrails.rules.extended_resources import is_legacy_gpu_resource

from .helpers import PINNED_GPU, claim_template, docs, gpu_pod_spec, mig_request, pod, rules_of


def errors(*objects: dict[str, Any], version: str = "1.32") -> set[str]:
    return rules_of(audit(list(objects), kubernetes_version=version), "error")


def warnings(*objects: dict[str, Any]) -> set[str]:
    return rules_of(audit(list(objects)), "warning")


def test_pack_metadata_is_complete() -> None:
    assert [r.id for r in RULES] == [f"DRA{i:03d}" for i in (*range(15), *range(16, 23))]
    for rule in RULES:
        assert rule.why and rule.fix and rule.name
        assert (rule.object_check is None) != (rule.set_check is None) or rule.id == "DRA006"


# --- DRA001 -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [
    "nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.5gb", "nvidia.com/mig-3g.40gb",
    "nvidia.com/gpumem", "amd.com/gpu", "gpu.intel.com/i915", "nvidia.com/GA100_A100_PCIE_40GB",
    "aliyun.com/gpu-mem", "volcano.sh/vgpu-number",
])
def test_dra001_flags_gpu_extended_resources(name: str) -> None:
    assert is_legacy_gpu_resource(name)
    spec = {"containers": [{"name": "c", "resources": {"requests": {name: 1}}}]}
    assert "DRA001" in errors(pod(spec))


@pytest.mark.parametrize("name", [
    "cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "nvidia.com/rdma_shared_device_a",
    "nvidia.com/hostdev", "example.com/foo",
])
def test_dra001_leaves_other_resources(name: str) -> None:
    assert not is_legacy_gpu_resource(name)
    assert "DRA001" not in errors(pod({"containers": [{"name": "c", "resources": {"limits": {name: 1}}}]}))


def test_dra001_checks_init_containers_and_pod_level_resources() -> None:
    init = pod({"initContainers": [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
                "containers": [{"name": "c"}]})
    assert "DRA001" in errors(init)
    pod_level = pod({"resources": {"limits": {"nvidia.com/gpu": 1}}, "containers": [{"name": "c"}]})
    assert "DRA001" in errors(pod_level)


# --- DRA002 -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "value", "flagged"), [
    ("NVIDIA_VISIBLE_DEVICES", "all", True),
    ("NVIDIA_VISIBLE_DEVICES", "GPU-8f3c", True),
    ("CUDA_VISIBLE_DEVICES", "0,1", True),
    ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "50", True),
    ("CUDA_MPS_PIPE_DIRECTORY", "/tmp/mps", True),
    ("CUDA_VISIBLE_DEVICES", "-1", False),
    ("CUDA_VISIBLE_DEVICES", "", False),
    ("NVIDIA_VISIBLE_DEVICES", "void", False),
    ("NVIDIA_DRIVER_CAPABILITIES", "compute,utility", False),
    ("CUDA_DEVICE_ORDER", "PCI_BUS_ID", False),
])
def test_dra002_env_values(name: str, value: str, flagged: bool) -> None:
    assert selects_devices(name, value, False) is flagged
    spec = {"containers": [{"name": "c", "env": [{"name": name, "value": value}]}]}
    assert ("DRA002" in errors(pod(spec))) is flagged


def test_dra002_value_from_counts_as_selection() -> None:
    env = [{"name": "CUDA_VISIBLE_DEVICES", "valueFrom": {"configMapKeyRef": {"name": "x", "key": "k"}}}]
    assert "DRA002" in errors(pod({"containers": [{"name": "c", "env": env}]}))


def test_dra002_reads_env_from_configmaps_and_secrets_in_the_set() -> None:
    deployment = docs("""
apiVersion: apps/v1
kind: Deployment
metadata: {name: d, namespace: ml}
spec:
  template:
    spec:
      containers:
      - name: c
        envFrom: [{configMapRef: {name: cm}}, {secretRef: {name: s}, prefix: APP_}]
""")[0]
    selecting = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ml"},
                 "data": {"CUDA_VISIBLE_DEVICES": "2"}}
    harmless = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ml"},
                "data": {"CUDA_VISIBLE_DEVICES": "-1", "LOG": "debug"}}
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "ml"},
              "data": {"CUDA_VISIBLE_DEVICES": "MA=="}}  # prefixed to APP_CUDA_VISIBLE_DEVICES: harmless
    assert "DRA002" in errors(deployment, selecting, secret)
    assert "DRA002" not in errors(deployment, harmless, secret)


# --- DRA003 -------------------------------------------------------------------------------------

def test_dra003_all_mode_is_an_error_but_admin_access_is_the_exception() -> None:
    all_mode = {"name": "g", "deviceClassName": "gpu.nvidia.com", "allocationMode": "All",
                "selectors": [{"cel": {"expression": PINNED_GPU}}]}
    assert "DRA003" in errors(claim_template([all_mode]))
    assert "DRA003" not in errors(claim_template([{**all_mode, "adminAccess": True}]))


@pytest.mark.parametrize("count", [0, -1, "2", 1.5, True])
def test_dra003_bad_counts(count: Any) -> None:
    assert "DRA003" in errors(claim_template([mig_request(count=count)]))


def test_dra003_implicit_mode_and_count_is_a_warning() -> None:
    implicit = {"name": "g", "deviceClassName": "mig.nvidia.com",
                "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]}
    assert "DRA003" not in errors(claim_template([implicit]))
    assert "DRA003" in warnings(claim_template([implicit]))
    assert "DRA003" not in warnings(claim_template([mig_request(count=2)]))


def test_dra003_reads_v1_exactly_and_first_available() -> None:
    exactly = {"name": "g", "exactly": {**mig_request(), "allocationMode": "All"}}
    assert "DRA003" in errors(claim_template([exactly], version="v1"))
    sub = {**mig_request(name="s"), "allocationMode": "All"}
    del sub["count"]
    assert "DRA003" in errors(claim_template([{"name": "g", "firstAvailable": [sub]}], version="v1"))
    assert "DRA003" not in errors(claim_template([{"name": "g", "exactly": mig_request()}], version="v1"))


# --- DRA004 -------------------------------------------------------------------------------------

def test_dra004_rejects_quantity_ordering_operators() -> None:
    memory = "device.capacity['gpu.nvidia.com'].memory"
    bad = mig_request(selectors=[{"cel": {"expression": f"{memory} >= quantity('40Gi')"}}])
    good = mig_request(selectors=[{"cel": {"expression": f"{memory}.compareTo(quantity('40Gi')) >= 0"}}])
    assert "DRA004" in errors(claim_template([bad]))
    assert "DRA004" not in errors(claim_template([good]))


def test_dra004_mig_attribute_under_whole_gpu_class() -> None:
    wrong = {**mig_request(), "deviceClassName": "gpu.nvidia.com"}
    assert "DRA004" in errors(claim_template([wrong]))
    attrs = "device.attributes['gpu.nvidia.com']"
    guarded = {**wrong, "selectors": [{"cel": {"expression": f"'profile' in {attrs} && {attrs}.profile == 'x'"}}]}
    assert "DRA004" not in errors(claim_template([guarded]))


def test_dra004_pinning_is_a_warning() -> None:
    unpinned = {"name": "g", "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1,
                "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].architecture == 'Hopper'"}}]}
    pinned = {**unpinned, "selectors": [{"cel": {"expression": PINNED_GPU}}]}
    product = {**unpinned, "selectors": [{"cel": {"expression":
               "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"}}]}
    assert "DRA004" in warnings(claim_template([unpinned]))
    assert "DRA004" not in warnings(claim_template([pinned]))
    assert "DRA004" not in warnings(claim_template([product]))
    assert "DRA004" not in errors(claim_template([unpinned]))


def test_dra004_other_drivers_and_admin_access_need_no_pinning() -> None:
    other = {"name": "n", "deviceClassName": "rdma.example.com", "allocationMode": "ExactCount", "count": 1}
    admin = {"name": "a", "deviceClassName": "gpu.nvidia.com", "allocationMode": "All", "adminAccess": True}
    result = audit([claim_template([other]), claim_template([admin], name="admin")])
    assert "DRA004" not in rules_of(result)


def test_dra004_checks_device_class_selectors_and_empty_expressions() -> None:
    device_class = {"apiVersion": "resource.k8s.io/v1beta1", "kind": "DeviceClass", "metadata": {"name": "big"},
                    "spec": {"selectors": [{"cel": {"expression": "device.capacity['gpu.nvidia.com'].memory > 1"}}]}}
    assert "DRA004" in errors(device_class)
    assert "DRA004" in errors(claim_template([mig_request(selectors=[{"cel": {}}])]))


def test_dra004_follows_the_target_version() -> None:
    # String functions on attributes: rejected by 1.32.0-1.32.2 (cost bug), accepted from 1.32.3.
    lower = mig_request(selectors=[{"cel": {"expression":
        "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$') && "
        "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"}}])
    assert "DRA004" in errors(claim_template([lower]), version="1.32.0")
    assert "DRA004" not in errors(claim_template([lower]), version="1.32.3")


# --- DRA005 -------------------------------------------------------------------------------------

def test_dra005_claim_references() -> None:
    ok = pod(gpu_pod_spec())
    assert "DRA005" not in errors(ok)
    unused = pod({**gpu_pod_spec(), "containers": [{"name": "c"}]})
    assert "DRA005" in errors(unused)
    undeclared = pod({**gpu_pod_spec(), "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"},
                                                                                                {"name": "x"}]}}]})
    assert "DRA005" in errors(undeclared)
    both = pod({**gpu_pod_spec(), "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t",
                                                      "resourceClaimName": "c"}]})
    assert "DRA005" in errors(both)
    duplicate = pod({**gpu_pod_spec(), "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}] * 2})
    assert "DRA005" in errors(duplicate)


def test_dra005_request_names_resolve_against_the_template_in_the_set() -> None:
    template = claim_template([mig_request("a"), mig_request("b")])
    spec = gpu_pod_spec()
    spec["containers"][0]["resources"]["claims"][0]["request"] = "b"
    assert "DRA005" not in errors(template, pod(spec))
    spec["containers"][0]["resources"]["claims"][0]["request"] = "c"
    assert "DRA005" in errors(template, pod(spec))
    assert "DRA005" not in errors(pod(spec))  # template not in the set: cannot tell


def test_dra005_a_container_listing_a_claim_twice() -> None:
    spec = gpu_pod_spec()
    spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}, {"name": "gpu"}]  # two same-named templates
    result = audit([pod(spec)])
    [hit] = [f for f in result.errors if f.rule == "DRA005"]
    assert hit.path == "spec.containers[0].resources.claims[1]" and "twice" in hit.message
    spec["containers"][0]["resources"]["claims"][1]["request"] = "gpu"  # the whole claim and one request: allowed
    assert "DRA005" not in errors(pod(spec))
    spec["containers"][0]["resources"]["claims"] += [{"name": []}, {"name": "gpu", "request": []}]  # malformed
    assert "DRA005" in errors(pod(spec))  # reported, no crash (a property test found the unhashable name)


def test_dra005_a_template_of_another_namespace() -> None:
    theirs = claim_template([mig_request()], namespace="team-a")
    mine = pod(gpu_pod_spec(), namespace="team-b")
    result = audit([theirs, mine])
    [hit] = [f for f in result.errors if f.rule == "DRA005"]
    assert hit.object == "Pod/team-b/p" and hit.path == "spec.resourceClaims[0].resourceClaimTemplateName"
    assert "not in the pod's namespace 'team-b' but in 'team-a'" in hit.message
    assert "DRA005" not in errors(claim_template([mig_request()], namespace="team-b"), theirs, mine)
    assert "DRA005" not in errors(mine)  # not in the set at all: cannot tell
    unnamespaced = claim_template([mig_request()])
    del unnamespaced["metadata"]["namespace"]
    assert "DRA005" not in errors(unnamespaced, mine)  # lands wherever it is applied
    other_file = Manifest(theirs, file="b.yaml")  # another kubectl apply: that template is not the pod's
    assert "DRA005" not in {f.rule for f in audit([other_file, Manifest(mine, file="a.yaml")]).errors}


def test_dra005_init_container_use_counts() -> None:
    spec = gpu_pod_spec()
    spec["initContainers"] = spec.pop("containers")
    spec["containers"] = [{"name": "main"}]
    assert "DRA005" not in errors(pod(spec))


# --- DRA006 -------------------------------------------------------------------------------------

@pytest.mark.parametrize("sharing", [{"strategy": "TimeSlicing"}, {"strategy": "MPS"},
                                     {"mpsConfig": {"defaultActiveThreadPercentage": 20}}])
def test_dra006_flags_software_sharing(sharing: dict[str, Any]) -> None:
    config = [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": sharing}}}]
    assert "DRA006" in errors(claim_template([mig_request()], config=config))


def test_dra006_leaves_other_configs() -> None:
    mig_config = [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig"}}}]
    other_driver = [{"opaque": {"driver": "dra.example.com", "parameters": {"sharing": {"strategy": "MPS"}}}}]
    assert "DRA006" not in errors(claim_template([mig_request()], config=mig_config))
    assert "DRA006" not in errors(claim_template([mig_request()], config=other_driver))


def test_dra006_device_class_config() -> None:
    device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "ts"},
                    "spec": {"config": [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {
                        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                        "sharing": {"strategy": "TimeSlicing"}}}}]}}
    assert "DRA006" in errors(device_class)


def test_dra006_shared_claim_needs_two_tenants() -> None:
    def user(name: str, tenant: str | None) -> dict[str, Any]:
        spec = gpu_pod_spec()
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared"}]
        labels = {"tenant": tenant} if tenant else {}
        return pod(spec, name=name, labels=labels)

    assert "DRA006" in errors(user("a", "alpha"), user("b", "beta"))
    assert "DRA006" not in errors(user("a", "alpha"), user("b", "alpha"))
    assert "DRA006" not in errors(user("a", None), user("b", None))


# --- DRA007 -------------------------------------------------------------------------------------

def test_dra007_versions() -> None:
    for version in ("v1alpha2", "v1alpha3"):
        assert "DRA007" in errors(claim_template([mig_request()], version=version))
    for version in ("v1beta1",):
        assert "DRA007" not in errors(claim_template([mig_request()], version=version))
    for version in ("v1beta2", "v1"):
        assert "DRA007" not in errors(claim_template([{"name": "g", "exactly": mig_request()}], version=version))
    taint_rule = {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule", "metadata": {"name": "x"},
                  "spec": {"taint": {"key": "k", "effect": "NoSchedule"}}}
    assert "DRA007" not in errors(taint_rule)


def test_dra007_shapes() -> None:
    assert "DRA007" in errors(claim_template([{"name": "g", "exactly": mig_request()}]))  # exactly in v1beta1
    assert "DRA007" in errors(claim_template([mig_request(allocationMode="Immediate")]))
    source = pod({**gpu_pod_spec(), "resourceClaims": [{"name": "gpu", "source": {"resourceClaimTemplateName": "t"}}]})
    assert errors(source) == {"DRA007"}


# --- DRA008 -------------------------------------------------------------------------------------

def test_dra008_grace_period() -> None:
    assert "DRA008" not in errors(pod(gpu_pod_spec()))
    assert "DRA008" in errors(pod(gpu_pod_spec(terminationGracePeriodSeconds=0)))
    missing = gpu_pod_spec()
    del missing["terminationGracePeriodSeconds"]
    assert "DRA008" in warnings(pod(missing))
    cpu_only = {"containers": [{"name": "c"}], "terminationGracePeriodSeconds": 0}
    assert "DRA008" not in rules_of(audit([pod(cpu_only)]))


def test_dra008_non_gpu_claims_are_not_gpu_pods() -> None:
    nic = claim_template([{"name": "nic", "deviceClassName": "rdma.example.com", "allocationMode": "ExactCount",
                           "count": 1}], name="nic")
    spec = gpu_pod_spec(template="nic", terminationGracePeriodSeconds=0)
    assert "DRA008" not in errors(nic, pod(spec))


def test_dra008_pre_stop_for_library_built_pods() -> None:
    labels = {"app.kubernetes.io/managed-by": "dra-constructs"}
    assert "DRA008" in errors(pod(gpu_pod_spec(), labels=labels))
    spec = gpu_pod_spec()
    spec["containers"][0]["lifecycle"] = {"preStop": {"sleep": {"seconds": 5}}}
    assert "DRA008" not in errors(pod(spec, labels=labels))
    assert "DRA008" not in errors(pod(gpu_pod_spec()))  # hand-written pods: preStop not required


# --- DRA009 -------------------------------------------------------------------------------------

def test_dra009_needs_two_explicit_tenant_namespaces_and_no_sanitizer() -> None:
    a = pod(gpu_pod_spec(), name="a", namespace="tenant-a")
    b = pod(gpu_pod_spec(), name="b", namespace="tenant-b")
    same = pod(gpu_pod_spec(), name="c", namespace="tenant-a")
    sanitizer = {"apiVersion": "apps/v1", "kind": "DaemonSet",
                 "metadata": {"name": "s", "namespace": "dra-system",
                              "labels": {"dra-constructs.io/component": "sanitizer"}},
                 "spec": {"template": {"spec": {"containers": [{"name": "s"}]}}}}
    assert "DRA009" in errors(a, b)
    assert "DRA009" not in errors(a, same)
    assert "DRA009" not in errors(a, b, sanitizer)
    unlabelled = {**sanitizer, "metadata": {"name": "s", "namespace": "dra-system"}}
    assert "DRA009" in errors(a, b, unlabelled)
    cpu = pod({"containers": [{"name": "c"}]}, name="cpu", namespace="tenant-b")
    assert "DRA009" not in errors(a, cpu)


def test_every_rule_id_is_known() -> None:
    assert set(RULES_BY_ID) == {f"DRA{i:03d}" for i in (*range(15), *range(16, 23))}


def test_dra009_tenant_scope_file_judges_each_file() -> None:
    from dra_constructs.guardrails import Manifest, audit

    def gpu_deployment(namespace: str, file: str) -> Manifest:
        return Manifest({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w", "namespace": namespace},
            "spec": {"template": {"spec": {
                "terminationGracePeriodSeconds": 30,
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
                "containers": [{"name": "c", "image": "i", "resources": {"claims": [{"name": "gpu"}]}}]}}},
        }, file=file)

    separate = [gpu_deployment("team-a", "a.yaml"), gpu_deployment("team-b", "b.yaml")]
    together = [gpu_deployment("team-a", "ab.yaml"), gpu_deployment("team-b", "ab.yaml")]
    rules = lambda result: {f.rule for f in result.findings}  # noqa: E731
    assert "DRA009" in rules(audit(separate))  # the whole input is one set by default
    assert "DRA009" not in rules(audit(separate, tenant_scope="file"))
    assert "DRA009" in rules(audit(together, tenant_scope="file"))
