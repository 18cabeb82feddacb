"""dra-constructs: cdk8s constructs for GPU workloads on Kubernetes DRA, compliant by construction.

The pure-Python core (target, catalog, requests, CEL, guardrail rules, sanitizer runtime) imports
without Node.js. The construct layer (``GpuClaimTemplate``, ``GpuPod``, ...) needs cdk8s and is
imported lazily on first access, so ``import dra_constructs`` never starts the jsii kernel.
"""

from __future__ import annotations

from ._lazy import lazy_getattr

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing is a third of this module's cost

if TYPE_CHECKING:
    from ._scope import (
        KUBERNETES_VERSION_CONTEXT,
        set_dra_extended_resources,
        set_inventory,
        set_kubernetes_version,
        set_kueue_compatible,
        set_mig_mode,
    )
    from .catalog import DEVICE_CLASS_GPU, DEVICE_CLASS_MIG, GpuModel
    from .claims import CATALOG, GpuClaimTemplate
    from .errors import DraConstructsError
    from .guardrails.admission_policy import GuardrailsAdmissionPolicy
    from .guardrails.app_validation import GuardrailsError, enable_guardrails, suppress
    from .plus import attach_claims
    from .podspec import ClaimUse, Container, PodClaim, PreStop, render_pod_spec
    from .requests import (
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
    from .sanitizer.construct import SanitizerDaemonSet
    from .sanitizer.policy_class import PreemptionPolicyDeviceClass
    from .sanitizer.runtime.policy import ContextsRemaining, PreemptionPolicy
    from .target import Target
    from .tenants.construct import GpuTenant, KueueQueue, TenantPlatform
    from .tenants.quota import Mig, WholeGpu
    from .workload_options import PodFailurePolicy, RollingUpdate, VolumeClaimTemplate
    from .workloads import GpuDeployment, GpuJob, GpuPod, GpuStatefulSet

__version__ = "0.1.0"

# Every public name -> its module, imported on first attribute access (PEP 562): the pure core
# (catalog models, CEL) costs ~0.5 s of imports and the construct layer starts Node, so
# ``import dra_constructs`` itself imports neither (docs/performance.md, import time).
_LAZY = {
    "Alignment": ".requests",
    "CATALOG": ".claims",
    "ClaimUse": ".podspec",
    "Container": ".podspec",
    "ContextsRemaining": ".sanitizer.runtime.policy",
    "CustomRequest": ".requests",
    "DEVICE_CLASS_GPU": ".catalog",
    "DEVICE_CLASS_MIG": ".catalog",
    "DeviceToleration": ".requests",
    "DraConstructsError": ".errors",
    "FirstAvailable": ".requests",
    "GpuClaimTemplate": ".claims",
    "GpuDeployment": ".workloads",
    "GpuJob": ".workloads",
    "GpuModel": ".catalog",
    "GpuPod": ".workloads",
    "GpuRequest": ".requests",
    "GpuStatefulSet": ".workloads",
    "GpuTenant": ".tenants.construct",
    "GuardrailsAdmissionPolicy": ".guardrails.admission_policy",
    "GuardrailsError": ".guardrails.app_validation",
    "KUBERNETES_VERSION_CONTEXT": "._scope",
    "KueueQueue": ".tenants.construct",
    "MatchAttribute": ".requests",
    "Mig": ".tenants.quota",
    "MigRequest": ".requests",
    "NicRequest": ".requests",
    "PodClaim": ".podspec",
    "PodFailurePolicy": ".workload_options",
    "PreStop": ".podspec",
    "PreemptionPolicy": ".sanitizer.runtime.policy",
    "PreemptionPolicyDeviceClass": ".sanitizer.policy_class",
    "RollingUpdate": ".workload_options",
    "SanitizerDaemonSet": ".sanitizer.construct",
    "Target": ".target",
    "TenantPlatform": ".tenants.construct",
    "VolumeClaimTemplate": ".workload_options",
    "WholeGpu": ".tenants.quota",
    "attach_claims": ".plus",
    "enable_guardrails": ".guardrails.app_validation",
    "render_claim_spec": ".requests",
    "render_pod_spec": ".podspec",
    "set_dra_extended_resources": "._scope",
    "set_inventory": "._scope",
    "set_mig_mode": "._scope",
    "set_kubernetes_version": "._scope",
    "set_kueue_compatible": "._scope",
    "suppress": ".guardrails.app_validation",
}

__all__ = [
    "CATALOG",
    "DEVICE_CLASS_GPU",
    "DEVICE_CLASS_MIG",
    "KUBERNETES_VERSION_CONTEXT",
    "Alignment",
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
    "suppress",
]


__getattr__ = lazy_getattr(__name__, _LAZY)
