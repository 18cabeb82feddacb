"""Which workloads get AMD GPUs: the sanitizer does not sanitize AMD devices yet (issue 26 item 4).

A pod gets AMD devices through the legacy device plugin (``amd.com/gpu``, ROCm/k8s-device-plugin)
or a claim under the AMD GPU DRA driver's DeviceClass ``gpu.amd.com`` (or a class in the set whose
selectors name that driver). A claim whose template is not in the set is not known to be AMD.
"""

from __future__ import annotations

from dra_constructs.catalog.amd_driver import AMD_DEVICE_CLASS, AMD_DRIVER
from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.manifest import Manifest, as_list, mapping_get
from dra_constructs.guardrails.resources import legacy_gpu_resources

__all__ = ["AMD_LEGACY_RESOURCE", "is_amd_class", "uses_amd_devices"]

AMD_LEGACY_RESOURCE = "amd.com/gpu"


def is_amd_class(ctx: AuditContext, class_name: str) -> bool:
    """``gpu.amd.com``, or a DeviceClass in the set that selects the AMD driver's devices."""
    if class_name == AMD_DEVICE_CLASS:
        return True
    device_class = ctx.device_class(class_name)
    if device_class is None:
        return False
    return AMD_DRIVER in repr(as_list(mapping_get(device_class.obj, "spec", "selectors")))


def _compute(ctx: AuditContext, m: Manifest) -> bool:
    for pod in m.pods:
        for _, container in pod.containers():
            if any(name.startswith("amd.com/") for _, name in legacy_gpu_resources(container)):
                return True
        for _, entry in pod.claims():
            source = ctx.claim_source(m, entry)
            if source is not None and any(is_amd_class(ctx, r.device_class_name) for r in source.requests()):
                return True
    return False


def uses_amd_devices(ctx: AuditContext, m: Manifest) -> bool:
    """Whether a workload gets AMD GPUs or partitions (legacy resource or AMD DeviceClass)."""
    result: bool = ctx.memo("uses_amd_devices", m, lambda x: _compute(ctx, x))
    return result
