"""Tenants: a team's namespace, DRA device quota, Kueue queue and admission scope in one construct.

The quota keys, DeviceClass naming and Kueue object builders are pure Python
(:mod:`.quota`, :mod:`.kueue`); the constructs (``GpuTenant``, ``TenantPlatform``) need cdk8s
and are imported lazily on first attribute access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dra_constructs._lazy import lazy_getattr
from dra_constructs.tenants.kueue import QUEUE_NAME_LABEL, kueue_configuration, kueue_inadmissible
from dra_constructs.tenants.quota import (
    Mig,
    MigSlices,
    QuotaKey,
    TenantDeviceClass,
    WholeGpu,
    device_class_for,
    resolve_quotas,
)

if TYPE_CHECKING:
    from dra_constructs.constructs.tenants import GpuTenant, KueueQueue, TenantPlatform, set_kueue_compatible

_LAZY = {
    "GpuTenant": "dra_constructs.constructs.tenants",
    "KueueQueue": "dra_constructs.constructs.tenants",
    "TenantPlatform": "dra_constructs.constructs.tenants",
    "set_kueue_compatible": "dra_constructs.constructs.tenants",
}

__all__ = [
    "QUEUE_NAME_LABEL",
    "GpuTenant",
    "KueueQueue",
    "Mig",
    "MigSlices",
    "QuotaKey",
    "TenantDeviceClass",
    "TenantPlatform",
    "WholeGpu",
    "device_class_for",
    "kueue_configuration",
    "kueue_inadmissible",
    "resolve_quotas",
    "set_kueue_compatible",
]

__getattr__ = lazy_getattr(__name__, _LAZY)
