"""dra-constructs: cdk8s constructs for GPU workloads on Kubernetes DRA, compliant by construction.

The pure-Python core (target, catalog, requests, CEL, guardrail rules, sanitizer runtime) imports
without Node.js. The construct layer (``GpuClaimTemplate``, ``GpuPod``, ...) needs cdk8s and is
imported lazily on first access, so ``import dra_constructs`` never starts the jsii kernel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_getattr
from .catalog import DEVICE_CLASS_GPU, DEVICE_CLASS_MIG, GpuModel
from .errors import DraConstructsError
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
from .sanitizer.runtime.policy import ContextsRemaining, PreemptionPolicy
from .target import Target
from .tenants.quota import Mig, WholeGpu
from .workload_options import PodFailurePolicy, RollingUpdate, VolumeClaimTemplate

if TYPE_CHECKING:
    from ._scope import (
        KUBERNETES_VERSION_CONTEXT,
        set_inventory,
        set_kubernetes_version,
        set_kueue_compatible,
        set_mig_mode,
    )
    from .claims import CATALOG, GpuClaimTemplate
    from .guardrails.admission_policy import GuardrailsAdmissionPolicy
    from .guardrails.app_validation import GuardrailsError, enable_guardrails, suppress
    from .plus import attach_claims
    from .sanitizer.construct import SanitizerDaemonSet
    from .sanitizer.policy_class import PreemptionPolicyDeviceClass
    from .tenants.construct import GpuTenant, KueueQueue, TenantPlatform
    from .workloads import GpuDeployment, GpuJob, GpuPod, GpuStatefulSet

__version__ = "0.1.0"

# Construct-layer names -> module, imported on first attribute access (PEP 562).
_LAZY = {
    "CATALOG": ".claims",
    "GpuClaimTemplate": ".claims",
    "GpuDeployment": ".workloads",
    "GpuJob": ".workloads",
    "GpuPod": ".workloads",
    "GpuStatefulSet": ".workloads",
    "KUBERNETES_VERSION_CONTEXT": "._scope",
    "GuardrailsAdmissionPolicy": ".guardrails.admission_policy",
    "GuardrailsError": ".guardrails.app_validation",
    "attach_claims": ".plus",
    "enable_guardrails": ".guardrails.app_validation",
    "SanitizerDaemonSet": ".sanitizer.construct",
    "PreemptionPolicyDeviceClass": ".sanitizer.policy_class",
    "GpuTenant": ".tenants.construct",
    "KueueQueue": ".tenants.construct",
    "TenantPlatform": ".tenants.construct",
    "set_kueue_compatible": "._scope",
    "suppress": ".guardrails.app_validation",
    "set_inventory": "._scope",
    "set_mig_mode": "._scope",
    "set_kubernetes_version": "._scope",
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
    "set_inventory",
    "set_kubernetes_version",
    "set_kueue_compatible",
    "set_mig_mode",
    "suppress",
]


__getattr__ = lazy_getattr(__name__, _LAZY)
