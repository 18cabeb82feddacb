"""Typed catalog of NVIDIA GPU models, MIG profiles and the names the NVIDIA DRA driver publishes.

Pure Python: no cdk8s import, usable from the audit command and the node agent.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dra_constructs.catalog.driver import (
    ATTRIBUTE_DOMAIN,
    DEVICE_CLASS_GPU,
    DEVICE_CLASS_MIG,
    DEVICE_CLASS_SELECTORS,
    DRIVER,
    GPU_ATTRIBUTES,
    GPU_CAPACITIES,
    MIG_ATTRIBUTES,
    MIG_CAPACITIES,
)
from dra_constructs.catalog.lookup import GpuModel, gpu_spec, mig_profile

if TYPE_CHECKING:
    from dra_constructs.catalog.data import GPU_SPECS
    from dra_constructs.catalog.devices import catalog_resource_slices
    from dra_constructs.catalog.models import GpuSpec, MigProfile

__all__ = [
    "ATTRIBUTE_DOMAIN",
    "DEVICE_CLASS_GPU",
    "DEVICE_CLASS_MIG",
    "DEVICE_CLASS_SELECTORS",
    "DRIVER",
    "GPU_ATTRIBUTES",
    "GPU_CAPACITIES",
    "GPU_SPECS",
    "MIG_ATTRIBUTES",
    "MIG_CAPACITIES",
    "GpuModel",
    "GpuSpec",
    "MigProfile",
    "catalog_resource_slices",
    "gpu_spec",
    "mig_profile",
]

# The typed entries (pydantic models) load on first use (PEP 562): the driver's names and
# ``GpuModel`` need none of them, and the audit command imports only those (pydantic and the entries
# were ~0.4 s of every ``audit``, docs/performance.md "Where audit stands"). Written out rather than
# ``dra_constructs._lazy``: the agent's zipapp carries this package but not ``_lazy``.
_LAZY = {"GPU_SPECS": ".data", "catalog_resource_slices": ".devices", "GpuSpec": ".models", "MigProfile": ".models"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
