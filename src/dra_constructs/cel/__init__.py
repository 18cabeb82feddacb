"""CEL selectors checked and evaluated as the Kubernetes API server and scheduler do.

``check`` judges a selector like the API server (``OK``, ``Invalid``, ``TooLong``,
``Forbidden``); ``evaluate``/``match_devices`` run selectors against devices like the
scheduler; devices come from ResourceSlice files or the synthetic catalog. Pure Python core:
no cdk8s import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dra_constructs._lazy import lazy_getattr

if TYPE_CHECKING:
    from dra_constructs.cel._runtime import CelRuntimeError
    from dra_constructs.cel.checker import MAX_COST, MAX_LENGTH, CelCheck, Verdict, check, check_many
    from dra_constructs.cel.fixes import suggest_fix
    from dra_constructs.cel.inventory import Device, devices_from_slices, load_resource_slices
    from dra_constructs.cel.matching import (
        best_pool,
        evaluate,
        explain_no_match,
        match_devices,
        matches_per_pool,
        split_conjuncts,
    )

# Loaded on first use (PEP 562): importing one submodule (``cel.inventory`` for the catalog and the
# tenants, ``cel.builder`` for requests) must not load the checker, the CEL runtime and protobuf
# (~0.3 s of every ``audit`` and ``fit`` command, docs/performance.md "Where audit stands").
__getattr__ = lazy_getattr(__name__, {
    "CelRuntimeError": "._runtime",
    **dict.fromkeys(("MAX_COST", "MAX_LENGTH", "CelCheck", "Verdict", "check", "check_many"), ".checker"),
    "suggest_fix": ".fixes",
    **dict.fromkeys(("Device", "devices_from_slices", "load_resource_slices"), ".inventory"),
    **dict.fromkeys(("best_pool", "evaluate", "explain_no_match", "match_devices", "matches_per_pool",
                     "split_conjuncts"), ".matching"),
})

__all__ = [
    "MAX_COST",
    "MAX_LENGTH",
    "CelCheck",
    "CelRuntimeError",
    "Device",
    "Verdict",
    "best_pool",
    "catalog_devices",
    "check",
    "check_many",
    "devices_from_slices",
    "evaluate",
    "explain_no_match",
    "load_resource_slices",
    "match_devices",
    "matches_per_pool",
    "split_conjuncts",
    "suggest_fix",
]


def catalog_devices() -> list[Device]:
    """The devices of ``dra_constructs.catalog.catalog_resource_slices()`` (the default inventory)."""
    from dra_constructs.catalog import catalog_resource_slices
    from dra_constructs.cel.inventory import devices_from_slices

    global _CATALOG
    if _CATALOG is None:
        _CATALOG = devices_from_slices(catalog_resource_slices())
    return list(_CATALOG)


_CATALOG: list[Device] | None = None
