"""The hook where claim requests meet the CEL checker and evaluator (``dra_constructs.cel``).

For every request of a claim: each selector must pass the API server's checks for the target
version, and - with an inventory (the catalog's synthetic devices by default) - at least ``count``
devices on one node must match the DeviceClass selector and all request selectors.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from .catalog import DEVICE_CLASS_SELECTORS, catalog_resource_slices
from .errors import DraConstructsError
from .target import Target
from .validation import Where, _where

if TYPE_CHECKING:
    from .cel import Device
    from .requests import DeviceRequest, ResolvedRequest

__all__ = ["Inventory", "catalog_inventory", "check_requests"]

Inventory = Sequence["Device"]


class CatalogDevices(Sequence["Device"]):
    """The catalog's 1,040 synthetic devices, built on first use (~0.15 s with their CEL index).

    Claims whose selectors are all generated from the catalog never build them: their answer
    is in :data:`CATALOG_TABLE_PATH` (see :func:`catalog_table`).
    """

    def __init__(self) -> None:
        self._devices: tuple[Device, ...] | None = None

    @property
    def materialized(self) -> bool:
        return self._devices is not None

    def _all(self) -> tuple[Device, ...]:
        if self._devices is None:
            from .cel import devices_from_slices

            self._devices = tuple(devices_from_slices(catalog_resource_slices()))
        return self._devices

    def __len__(self) -> int:
        return len(self._all())

    @overload
    def __getitem__(self, index: int) -> Device: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Device]: ...
    def __getitem__(self, index: int | slice) -> Device | Sequence[Device]:
        return self._all()[index]

    def __iter__(self) -> Iterator[Device]:
        return iter(self._all())


_CATALOG_DEVICES = CatalogDevices()


def catalog_inventory() -> CatalogDevices:
    """Devices of every catalog GPU model, whole and partitioned into each MIG profile (lazy)."""
    return _CATALOG_DEVICES


#: Precomputed (best pool count, explanation) of the selectors the library generates, against the
#: catalog (``scripts/catalog_satisfiability.py`` writes it; tests/core/test_catalog_satisfiability.py
#: recomputes every entry with the CEL evaluator, for every supported target).
CATALOG_TABLE_PATH = Path(__file__).with_name("catalog") / "satisfiability.json"


@lru_cache(maxsize=1)
def catalog_table() -> dict[tuple[str, tuple[str, ...]], tuple[int, str | None]]:
    """(device class, selectors) -> (best pool count, explanation) for the catalog's generated selectors."""
    entries = json.loads(CATALOG_TABLE_PATH.read_text())
    return {(e["class"], tuple(e["selectors"])): (e["best"], e["detail"]) for e in entries}


def generated_catalog_requests() -> list[tuple[str, tuple[str, ...]]]:
    """(device class, selectors) of every request shape the catalog generates: each MIG profile, each model."""
    from .catalog import GPU_SPECS
    from .requests import GpuRequest, MigRequest

    shapes: list[Any] = [GpuRequest(models=(spec.key,)) for spec in GPU_SPECS]
    shapes += [GpuRequest(models=tuple(spec.key for spec in GPU_SPECS))]
    shapes += [MigRequest(gpu=spec.key, profile=p.name) for spec in GPU_SPECS for p in spec.mig_profiles]
    return list(dict.fromkeys((r.device_class(), tuple(r.generated_selectors("catalog"))) for r in shapes))


def compute_best_pool(device_class: str, selectors: tuple[str, ...], target: Target,
                      inventory: Inventory) -> tuple[int, str | None]:
    """Evaluate the selectors on every device (the live path behind the table)."""
    from .cel import explain_no_match, match_devices

    class_selectors = [DEVICE_CLASS_SELECTORS[device_class]]
    results = match_devices(class_selectors, list(selectors), inventory, target)
    errors = [f"{device}: {value}" for device, value in results.items() if isinstance(value, str)]
    per_pool: Counter[str] = Counter(
        device.rsplit("/", 1)[0] for device, value in results.items() if value is True
    )
    best = max(per_pool.values(), default=0)
    detail: str | None = None
    if errors:
        detail = "run-time error (the scheduler fails the allocation, it does not skip the device): " + errors[0]
    elif best == 0:
        detail = explain_no_match(class_selectors, list(selectors), inventory, target)
    return best, detail


def _check_expression(where: Where, request: str, expression: str, target: Target) -> None:
    from .cel import check

    result = check(expression, target)
    if result.verdict != "OK":
        raise DraConstructsError(
            _where(where), f"requests[{request!r}].selectors", expression,
            f"{result.verdict}: {result.error}",
            result.fix or "rewrite the expression; `dra-constructs cel check` shows the API server's verdict",
        )


# (device class, selectors, target, inventory id) -> (best pool count, explanation or runtime error)
_MATCH_CACHE: dict[tuple[Any, ...], tuple[int, str | None]] = {}


def _best_pool(
    device_class: str, selectors: tuple[str, ...], target: Target, inventory: Inventory
) -> tuple[int, str | None]:
    key = (device_class, selectors, target, id(inventory))
    cached = _MATCH_CACHE.get(key)
    if cached is not None:
        return cached
    found = catalog_table().get((device_class, selectors)) if inventory is _CATALOG_DEVICES else None
    if found is None:
        found = compute_best_pool(device_class, selectors, target, inventory)
    _MATCH_CACHE[key] = found
    return found


def _unsatisfied(request: DeviceRequest, selectors: list[str], target: Target, where: Where,
                 inventory: Inventory) -> DraConstructsError | None:
    """Why ``request`` cannot be allocated from ``inventory`` (``None`` if it can, or if unknowable)."""
    device_class = request.catalog_class()  # a narrower class (a tenant's) repeats its pins as selectors
    if device_class not in DEVICE_CLASS_SELECTORS:
        return None  # not an NVIDIA class: the inventory cannot speak for it
    best, detail = _best_pool(device_class, tuple(selectors), target, inventory)
    need = 1 if getattr(request, "allocation_mode", "ExactCount") == "All" else request.count
    if detail is not None and detail.startswith("run-time error"):
        from .cel.fixes import suggest_fix

        return DraConstructsError(
            _where(where), f"requests[{request.name!r}].selectors", selectors, detail,
            suggest_fix("", detail, device_class) or "guard optional attributes with `'name' in "
            "device.attributes['domain']` and compare versions with semver(...)",
        )
    if best < need:
        why = detail or f"at most {best} matching devices are on any one node"
        return DraConstructsError(
            _where(where), f"requests[{request.name!r}]", f"count={need}",
            f"no node of the inventory has {need} devices of class {device_class} matching the "
            f"selectors: {why}",
            "relax the selectors (NVML reports memory below the marketed size, e.g. an H100 80GB "
            "has 79.65Gi), lower count, or pass inventory= with your cluster's ResourceSlices",
        )
    return None


def check_requests(
    resolved: Sequence[ResolvedRequest],
    target: Target,
    where: Where,
    inventory: Inventory | None,
) -> None:
    """Check every selector; then, with an inventory, that every request can be satisfied.

    A request with alternatives (``firstAvailable``) is satisfiable when any alternative is; a
    run-time error in any alternative fails it (the scheduler fails the allocation).
    """
    for _, alternatives in resolved:
        for request, selectors in alternatives:
            for expression in selectors:
                _check_expression(where, request.name, expression, target)
    if inventory is None:
        return
    for name, alternatives in resolved:
        problems = [_unsatisfied(r, s, target, where, inventory) for r, s in alternatives]
        errors = [p for p in problems if p is not None and "run-time error" in p.problem]
        if errors:
            raise errors[0]
        failures = [p for p in problems if p is not None]
        if len(failures) < len(problems):
            continue
        if len(failures) == 1:
            raise failures[0]
        raise DraConstructsError(
            _where(where), f"requests[{name!r}].alternatives", [r.name for r, _ in alternatives],
            "no alternative can be allocated: " + "; ".join(
                f"{r.name}: {p.problem}" for (r, _), p in zip(alternatives, failures, strict=True)),
            "add an alternative the inventory has, or relax the selectors",
        )
