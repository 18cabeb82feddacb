"""Typed catalog of NVIDIA GPU models, MIG profiles and the names the NVIDIA DRA driver publishes.

Pure Python: no cdk8s import, usable from the audit command and the node agent.
"""

from __future__ import annotations

import difflib
from enum import StrEnum

from dra_constructs.catalog.data import GPU_SPECS
from dra_constructs.catalog.devices import catalog_resource_slices
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
from dra_constructs.catalog.models import GpuSpec, MigProfile
from dra_constructs.errors import DraConstructsError

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

_SPECS_BY_KEY = {spec.key: spec for spec in GPU_SPECS}


class GpuModel(StrEnum):
    """The GPU models in the catalog. ``GpuModel.H100_80GB.spec`` gives the typed entry."""

    A30 = "A30"
    A100_40GB = "A100_40GB"
    A100_80GB = "A100_80GB"
    H100_80GB = "H100_80GB"
    H100_NVL_94GB = "H100_NVL_94GB"
    H200_141GB = "H200_141GB"
    B200_180GB = "B200_180GB"

    @property
    def spec(self) -> GpuSpec:
        """The catalog entry of this model."""
        return _SPECS_BY_KEY[self.value]

    def __str__(self) -> str:
        return self.value


def gpu_spec(model: GpuModel | str, where: str = "catalog", field: str = "gpu") -> GpuSpec:
    """Look a GPU model up by enum member or key (case-insensitive); clear error if unknown."""
    key = model.value if isinstance(model, GpuModel) else str(model).upper().replace("-", "_")
    spec = _SPECS_BY_KEY.get(key)
    if spec is None:
        close = difflib.get_close_matches(key, _SPECS_BY_KEY, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise DraConstructsError(
            where, field, model, "not a GPU model in the catalog",
            f"{hint}use one of {', '.join(_SPECS_BY_KEY)} (dra_constructs.GpuModel)",
        )
    return spec


def mig_profile(model: GpuModel | str, profile: str, where: str = "catalog") -> MigProfile:
    """The MIG profile ``profile`` of ``model``; clear error naming the profiles it does have."""
    spec = gpu_spec(model, where)
    found = spec.profiles_by_name.get(profile)
    if found is None:
        close = difflib.get_close_matches(profile, spec.profiles_by_name, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise DraConstructsError(
            where, "profile", profile, f"{spec.key} has no MIG profile of that name",
            f"{hint}{spec.key} supports {', '.join(spec.profiles_by_name)}",
        )
    return found
