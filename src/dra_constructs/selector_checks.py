"""The hook where claim requests meet the CEL checker and evaluator (``dra_constructs.cel``).

For every request of a claim: each selector must pass the API server's checks for the target
version, and - with an inventory (the catalog's synthetic devices by default) - at least ``count``
devices on one node must match the DeviceClass selector and all request selectors.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .catalog import DEVICE_CLASS_SELECTORS, catalog_resource_slices
from .errors import DraConstructsError
from .target import Target
from .validation import Where, _where

if TYPE_CHECKING:
    from .cel import Device
    from .requests import DeviceRequest, ResolvedRequest

__all__ = ["Inventory", "catalog_inventory", "check_requests"]

Inventory = Sequence["Device"]


@lru_cache(maxsize=1)
def catalog_inventory() -> tuple[Device, ...]:
    """Devices of every catalog GPU model, whole and partitioned into each MIG profile."""
    from .cel import devices_from_slices

    return tuple(devices_from_slices(catalog_resource_slices()))


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
    _MATCH_CACHE[key] = (best, detail)
    return best, detail


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
