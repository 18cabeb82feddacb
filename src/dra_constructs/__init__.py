"""dra-constructs: cdk8s constructs for GPU workloads on Kubernetes DRA, compliant by construction.

The pure-Python core (target, catalog, requests, CEL, guardrail rules, sanitizer runtime) imports
without Node.js. The construct layer (``GpuClaimTemplate``, ``GpuPod``, ...) needs cdk8s and is
imported lazily on first access, so ``import dra_constructs`` never starts the jsii kernel.
"""

from __future__ import annotations

from dra_constructs import _moved
from dra_constructs._lazy import lazy_getattr

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing is a third of this module's cost

if TYPE_CHECKING:
    from dra_constructs.agent.policy import ContextsRemaining, PreemptionPolicy
    from dra_constructs.catalog import DEVICE_CLASS_GPU, DEVICE_CLASS_MIG, GpuModel
    from dra_constructs.constructs.admission_policy import GuardrailsAdmissionPolicy
    from dra_constructs.constructs.claims import CATALOG, GpuClaimTemplate
    from dra_constructs.constructs.guardrails import GuardrailsError, enable_guardrails, suppress
    from dra_constructs.constructs.plus import attach_claims
    from dra_constructs.constructs.sanitizer.construct import SanitizerDaemonSet
    from dra_constructs.constructs.sanitizer.policy_class import PreemptionPolicyDeviceClass
    from dra_constructs.constructs.scope import (
        KUBERNETES_VERSION_CONTEXT,
        set_dra_extended_resources,
        set_inventory,
        set_kubernetes_version,
        set_kueue_compatible,
        set_mig_mode,
        set_nvidia_driver_version,
    )
    from dra_constructs.constructs.tenants import GpuTenant, KueueQueue, TenantPlatform
    from dra_constructs.constructs.workloads import GpuDeployment, GpuJob, GpuPod, GpuStatefulSet
    from dra_constructs.errors import DraConstructsError
    from dra_constructs.podspec import ClaimUse, Container, PodClaim, PreStop, render_pod_spec
    from dra_constructs.requests import (
        Alignment,
        CustomRequest,
        DeviceToleration,
        FirstAvailable,
        GpuRequest,
        MatchAttribute,
        MigRequest,
        NicRequest,
        render_claim_spec,
    )
    from dra_constructs.requests_amd import AmdGpuRequest, AmdPartitionRequest
    from dra_constructs.target import Target
    from dra_constructs.tenants.quota import AmdGpu, AmdPartition, Mig, MigSlices, WholeGpu
    from dra_constructs.workload_options import PodFailurePolicy, RollingUpdate, VolumeClaimTemplate

__version__ = "0.1.0"

# Every public name -> its module, imported on first attribute access (PEP 562): the pure core
# (catalog models, CEL) costs ~0.5 s of imports and the construct layer starts Node, so
# ``import dra_constructs`` itself imports neither (docs/performance.md, import time).
_LAZY = {
    "Alignment": "dra_constructs.requests",
    "AmdGpu": "dra_constructs.tenants.quota",
    "AmdGpuRequest": "dra_constructs.requests_amd",
    "AmdPartition": "dra_constructs.tenants.quota",
    "AmdPartitionRequest": "dra_constructs.requests_amd",
    "CATALOG": "dra_constructs.constructs.claims",
    "ClaimUse": "dra_constructs.podspec",
    "Container": "dra_constructs.podspec",
    "ContextsRemaining": "dra_constructs.agent.policy",
    "CustomRequest": "dra_constructs.requests",
    "DEVICE_CLASS_GPU": "dra_constructs.catalog",
    "DEVICE_CLASS_MIG": "dra_constructs.catalog",
    "DeviceToleration": "dra_constructs.requests",
    "DraConstructsError": "dra_constructs.errors",
    "FirstAvailable": "dra_constructs.requests",
    "GpuClaimTemplate": "dra_constructs.constructs.claims",
    "GpuDeployment": "dra_constructs.constructs.workloads",
    "GpuJob": "dra_constructs.constructs.workloads",
    "GpuModel": "dra_constructs.catalog",
    "GpuPod": "dra_constructs.constructs.workloads",
    "GpuRequest": "dra_constructs.requests",
    "GpuStatefulSet": "dra_constructs.constructs.workloads",
    "GpuTenant": "dra_constructs.constructs.tenants",
    "GuardrailsAdmissionPolicy": "dra_constructs.constructs.admission_policy",
    "GuardrailsError": "dra_constructs.constructs.guardrails",
    "KUBERNETES_VERSION_CONTEXT": "dra_constructs.constructs.scope",
    "KueueQueue": "dra_constructs.constructs.tenants",
    "MatchAttribute": "dra_constructs.requests",
    "Mig": "dra_constructs.tenants.quota",
    "MigSlices": "dra_constructs.tenants.quota",
    "MigRequest": "dra_constructs.requests",
    "NicRequest": "dra_constructs.requests",
    "PodClaim": "dra_constructs.podspec",
    "PodFailurePolicy": "dra_constructs.workload_options",
    "PreStop": "dra_constructs.podspec",
    "PreemptionPolicy": "dra_constructs.agent.policy",
    "PreemptionPolicyDeviceClass": "dra_constructs.constructs.sanitizer.policy_class",
    "RollingUpdate": "dra_constructs.workload_options",
    "SanitizerDaemonSet": "dra_constructs.constructs.sanitizer.construct",
    "Target": "dra_constructs.target",
    "TenantPlatform": "dra_constructs.constructs.tenants",
    "VolumeClaimTemplate": "dra_constructs.workload_options",
    "WholeGpu": "dra_constructs.tenants.quota",
    "attach_claims": "dra_constructs.constructs.plus",
    "enable_guardrails": "dra_constructs.constructs.guardrails",
    "render_claim_spec": "dra_constructs.requests",
    "render_pod_spec": "dra_constructs.podspec",
    "set_dra_extended_resources": "dra_constructs.constructs.scope",
    "set_inventory": "dra_constructs.constructs.scope",
    "set_mig_mode": "dra_constructs.constructs.scope",
    "set_nvidia_driver_version": "dra_constructs.constructs.scope",
    "set_kubernetes_version": "dra_constructs.constructs.scope",
    "set_kueue_compatible": "dra_constructs.constructs.scope",
    "suppress": "dra_constructs.constructs.guardrails",
}

__all__ = [
    "CATALOG",
    "DEVICE_CLASS_GPU",
    "DEVICE_CLASS_MIG",
    "KUBERNETES_VERSION_CONTEXT",
    "Alignment",
    "AmdGpu",
    "AmdGpuRequest",
    "AmdPartition",
    "AmdPartitionRequest",
    "ClaimUse",
    "Container",
    "ContextsRemaining",
    "CustomRequest",
    "DeviceToleration",
    "DraConstructsError",
    "FirstAvailable",
    "GpuClaimTemplate",
    "GpuDeployment",
    "GpuJob",
    "GpuModel",
    "GpuPod",
    "GpuRequest",
    "GpuStatefulSet",
    "GpuTenant",
    "GuardrailsAdmissionPolicy",
    "GuardrailsError",
    "KueueQueue",
    "MatchAttribute",
    "Mig",
    "MigRequest",
    "MigSlices",
    "NicRequest",
    "PodClaim",
    "PodFailurePolicy",
    "PreStop",
    "PreemptionPolicy",
    "PreemptionPolicyDeviceClass",
    "RollingUpdate",
    "SanitizerDaemonSet",
    "Target",
    "TenantPlatform",
    "VolumeClaimTemplate",
    "WholeGpu",
    "__version__",
    "attach_claims",
    "enable_guardrails",
    "render_claim_spec",
    "render_pod_spec",
    "set_dra_extended_resources",
    "set_inventory",
    "set_kubernetes_version",
    "set_kueue_compatible",
    "set_mig_mode",
    "set_nvidia_driver_version",
    "suppress",
]


__getattr__ = lazy_getattr(__name__, _LAZY)
_moved.install()
