"""``GpuModel`` and the catalog look-ups ``gpu_spec``/``mig_profile``, loading the typed entries on first call.

Naming a model (``GpuModel.H100_80GB``, a quota key's type) needs no catalog data: the entries
(:mod:`dra_constructs.catalog.data`, pydantic models) load when a look-up first runs, so the tenants
and the audit rules that import these names cost no pydantic import (docs/performance.md, "Where
audit stands").
"""

from __future__ import annotations

import difflib
import functools
from enum import StrEnum
from typing import TYPE_CHECKING

from dra_constructs.errors import DraConstructsError

if TYPE_CHECKING:
    from dra_constructs.catalog.models import GpuSpec, MigProfile

__all__ = ["GpuModel", "gpu_spec", "mig_profile"]


@functools.cache
def _specs_by_key() -> dict[str, GpuSpec]:
    """Catalog key -> entry, in catalog order (loads ``catalog.data`` once)."""
    from dra_constructs.catalog.data import GPU_SPECS

    return {spec.key: spec for spec in GPU_SPECS}


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
        return _specs_by_key()[self.value]

    def __str__(self) -> str:
        return self.value


# Defined here, public as ``dra_constructs.catalog.GpuModel`` (its home before this module existed).
GpuModel.__module__ = "dra_constructs.catalog"


def gpu_spec(model: GpuModel | str, where: str = "catalog", field: str = "gpu") -> GpuSpec:
    """Look a GPU model up by enum member or key (case-insensitive); clear error if unknown."""
    specs = _specs_by_key()
    key = model.value if isinstance(model, GpuModel) else str(model).upper().replace("-", "_")
    spec = specs.get(key)
    if spec is None:
        close = difflib.get_close_matches(key, specs, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise DraConstructsError(
            where, field, model, "not a GPU model in the catalog",
            f"{hint}use one of {', '.join(specs)} (dra_constructs.GpuModel)",
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
