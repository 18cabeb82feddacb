"""The hook where claim requests meet the CEL checker and the fit check (``dra_constructs.fit``).

For every request of a claim: each selector must pass the API server's checks for the target
version; no selector may fail at run time on a device of the inventory (the scheduler fails the
allocation then); and - with an inventory (the catalog's synthetic devices by default, static or
DynamicMIG by ``mig_mode``) - the structured allocator must find the whole claim a place on one
node: counters, constraints, ``firstAvailable`` and taints included.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from dra_constructs.catalog import DEVICE_CLASS_SELECTORS, catalog_resource_slices
from dra_constructs.catalog.network import NIC_CLASS_SELECTORS
from dra_constructs.errors import DraConstructsError
from dra_constructs.target import Target
from dra_constructs.validation import Where, _where

if TYPE_CHECKING:
    from dra_constructs.cel import Device
    from dra_constructs.fit import Claim, DeviceClass, NodeResult
    from dra_constructs.fit import Inventory as FitInventory
    from dra_constructs.requests import DeviceRequest, ResolvedRequest

__all__ = ["Inventory", "as_fit_inventory", "catalog_inventory", "check_requests"]

#: Devices (``dra_constructs.cel.Device``) or a fit inventory with pools and counter sets.
Inventory = Any

#: The DeviceClasses the catalog speaks for: the NVIDIA driver's and the network driver's NIC class.
KNOWN_CLASS_SELECTORS: dict[str, str] = {**DEVICE_CLASS_SELECTORS, **NIC_CLASS_SELECTORS}
#: Alignment attributes whose constraint the catalog checks on one node (its nodes carry the topology).
TOPOLOGY_ATTRIBUTES = frozenset({"resource.kubernetes.io/pcieRoot", "resource.kubernetes.io/numaNode"})


@lru_cache(maxsize=4)
def catalog_inventory(mig_mode: str = "static") -> FitInventory:
    """The catalog's GPUs (and NICs beside them) as a fit inventory: static MIG or DynamicMIG nodes."""
    from dra_constructs.fit import Inventory as FitInventory

    slices = catalog_resource_slices(mig_mode="dynamic" if mig_mode == "dynamic" else "static", network=True)
    return FitInventory.from_slices(slices)


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
            from dra_constructs.cel import devices_from_slices

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
    from dra_constructs.catalog import GPU_SPECS
    from dra_constructs.requests import GpuRequest, MigRequest

    shapes: list[Any] = [GpuRequest(models=(spec.key,)) for spec in GPU_SPECS]
    shapes += [GpuRequest(models=tuple(spec.key for spec in GPU_SPECS))]
    shapes += [MigRequest(gpu=spec.key, profile=p.name) for spec in GPU_SPECS for p in spec.mig_profiles]
    return list(dict.fromkeys((r.device_class(), tuple(r.generated_selectors("catalog"))) for r in shapes))


def compute_best_pool(device_class: str, selectors: tuple[str, ...], target: Target,
                      inventory: Inventory) -> tuple[int, str | None]:
    """Evaluate the selectors on every device (the live path behind the table)."""
    from dra_constructs.cel import explain_no_match, match_devices

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


_FIT_INVENTORIES: dict[int, tuple[Any, FitInventory]] = {}


def as_fit_inventory(inventory: Inventory) -> FitInventory:
    """``inventory`` as a fit inventory (a sequence of devices becomes pools without counter sets)."""
    from dra_constructs.fit import Inventory as FitInventory

    if isinstance(inventory, FitInventory):
        return inventory
    cached = _FIT_INVENTORIES.get(id(inventory))
    if cached is not None and cached[0] is inventory:
        return cached[1]
    built = FitInventory.from_devices(list(inventory))
    _FIT_INVENTORIES[id(inventory)] = (inventory, built)
    return built


def _check_expression(where: Where, request: str, expression: str, target: Target) -> None:
    from dra_constructs.cel import check

    result = check(expression, target)
    if result.verdict != "OK":
        raise DraConstructsError(
            _where(where), f"requests[{request!r}].selectors", expression,
            f"{result.verdict}: {result.error}",
            result.fix or "rewrite the expression; `dra-constructs cel check` shows the API server's verdict",
        )


# (device class, selectors, target, inventory id) -> first run-time error or None
_ERROR_CACHE: dict[tuple[Any, ...], str | None] = {}
# (claim, target, inventory id) -> None (fits) or the failing node results
_FIT_CACHE: dict[tuple[Any, ...], list[NodeResult] | None] = {}


def _runtime_error(device_class: str, selectors: tuple[str, ...], target: Target,
                   inventory: FitInventory) -> str | None:
    key = (device_class, selectors, target, id(inventory))
    if key in _ERROR_CACHE:
        return _ERROR_CACHE[key]
    from dra_constructs.cel import match_devices

    devices: list[Device] = [d.device for d in inventory.devices]
    results = match_devices([KNOWN_CLASS_SELECTORS[device_class]], list(selectors), devices, target)
    error = next((f"{device}: {value}" for device, value in results.items() if isinstance(value, str)), None)
    _ERROR_CACHE[key] = error
    return error


def _fit_failures(claim: Claim, target: Target, inventory: FitInventory,
                  classes: dict[str, DeviceClass]) -> list[NodeResult] | None:
    """``None`` if some node can allocate ``claim``, else every node's result."""
    key = (claim, target, id(inventory), tuple(sorted((k, v.selectors) for k, v in classes.items())))
    if key in _FIT_CACHE:
        return _FIT_CACHE[key]
    from dra_constructs.fit import fit

    gates = {**target.default_feature_gates, "DRAPartitionableDevices": target.has_partitionable_devices,
             "DRAPrioritizedList": target.has_first_available, "DRADeviceTaints": target.has_request_tolerations,
             "DRAAdminAccess": True}
    report = fit([claim], inventory, target=target, classes=classes, gates=gates, stop_at_first=True)
    failures = None if report.allocatable else list(report.nodes.values())
    _FIT_CACHE[key] = failures
    return failures


def _problem(failures: list[NodeResult], request: DeviceRequest, selectors: list[str], target: Target,
             inventory: FitInventory) -> str:
    """Why no node takes it, told about the node that got furthest (or the clause that excludes all)."""
    from dra_constructs.cel import explain_no_match

    best = next((r for r in failures if not r.no_match), None)
    if best is not None:
        return f"{best.reason} (best node: {best.node})"
    device_class = request.catalog_class()
    need = 1 if getattr(request, "allocation_mode", "ExactCount") == "All" else request.count
    return explain_no_match([KNOWN_CLASS_SELECTORS[device_class]], selectors, [d.device for d in inventory.devices],
                            target, need, device_class)


def _error(where: Where, name: str, need: int, problem: str) -> DraConstructsError:
    return DraConstructsError(
        _where(where), f"requests[{name!r}]", f"count={need}",
        f"no node of the inventory can allocate the claim: {problem}",
        "relax the selectors (NVML reports memory below the marketed size, e.g. an H100 80GB has 79.65Gi), "
        "lower count, or pass inventory= with your cluster's ResourceSlices",
    )


def _need(request: DeviceRequest) -> int:
    return 1 if getattr(request, "allocation_mode", "ExactCount") == "All" else int(request.count)


def _check_fit(claim: Claim, resolved: Sequence[ResolvedRequest], target: Target, where: Where,
               inventory: FitInventory, whole: bool) -> None:
    """The whole claim on one node (``whole``), else each request (each alternative) on its own."""
    classes = _classes(resolved)
    if whole:
        failures = _fit_failures(claim, target, inventory, classes)
        if failures is None:
            return
        best = next((r for r in failures if not r.no_match), failures[0] if failures else None)
        name = best.failed[1] if best is not None and best.failed else resolved[0][0]
        alternatives = next((alts for n, alts in resolved if n == name), resolved[0][1])
        request, selectors = alternatives[0]
        raise _error(where, name, _need(request), _problem(failures, request, selectors, target, inventory))
    for parsed, (name, alternatives) in zip(claim.requests, resolved, strict=True):
        problems = []
        for sub, (request, selectors) in zip(parsed.alternatives, alternatives, strict=True):
            from dra_constructs.fit import Claim as FitClaim
            from dra_constructs.fit import Request as FitRequest

            alone = FitClaim(claim.name, (FitRequest(parsed.name, (sub,), parsed.first_available),))
            failures = _fit_failures(alone, target, inventory, classes)
            if failures is None:
                break
            problems.append((request, _problem(failures, request, selectors, target, inventory)))
        else:
            if len(problems) == 1:
                request, problem = problems[0]
                raise _error(where, name, _need(request), problem)
            raise DraConstructsError(
                _where(where), f"requests[{name!r}].alternatives", [r.name for r, _ in alternatives],
                "no alternative can be allocated: " + "; ".join(f"{r.name}: {p}" for r, p in problems),
                "add an alternative the inventory has, or relax the selectors",
            )


def check_requests(
    resolved: Sequence[ResolvedRequest],
    target: Target,
    where: Where,
    inventory: Inventory | None,
    spec: dict[str, Any] | None = None,
    catalog: bool = False,
) -> None:
    """Check every selector; then, with an inventory, that the claim (``spec``) can be allocated.

    A run-time error of a selector on any device of the inventory fails the check (the scheduler
    fails the allocation, it does not skip the device). With a real inventory the whole claim
    must fit on one node; the ``catalog`` (one synthetic node per model, or per model and MIG
    profile) only stands for "some node of these GPUs", so there each request must fit alone.
    """
    for _, alternatives in resolved:
        for request, selectors in alternatives:
            for expression in selectors:
                _check_expression(where, request.name, expression, target)
    if inventory is None:
        return
    # The same claim against the same inventory passes again: one dict lookup per construct.
    passed_key = (repr(spec), target, id(inventory), catalog) if spec is not None else None
    if passed_key is not None and passed_key in _PASSED:
        return
    fit_inventory = as_fit_inventory(inventory)
    for _, alternatives in resolved:
        for request, selectors in alternatives:
            device_class = request.catalog_class()  # a narrower class (a tenant's) repeats its pins as selectors
            if device_class not in KNOWN_CLASS_SELECTORS:
                continue
            error = _runtime_error(device_class, tuple(selectors), target, fit_inventory)
            if error is not None:
                from dra_constructs.cel.fixes import suggest_fix

                detail = "run-time error (the scheduler fails the allocation, it does not skip the device): " + error
                raise DraConstructsError(
                    _where(where), f"requests[{request.name!r}].selectors", selectors, detail,
                    suggest_fix("", detail, device_class) or "guard optional attributes with `'name' in "
                    "device.attributes['domain']` and compare versions with semver(...)",
                )
    if spec is not None and _known_only(resolved):
        claim = _claim(spec, where)
        whole = not catalog or _aligned(claim) or not _nvidia_only(resolved)
        try:
            _check_fit(claim, resolved, target, where, fit_inventory, whole=whole)
        except DraConstructsError as error:
            if claim.constraints:
                _blame_constraints(claim, resolved, target, where, fit_inventory, error)
            raise
    if passed_key is not None:
        _PASSED[passed_key] = inventory  # keeps the inventory alive, so its id stays its own


_PASSED: dict[tuple[Any, ...], Any] = {}


def _aligned(claim: Claim) -> bool:
    """A topology constraint: the catalog checks such a claim on one node (each node has the topology)."""
    return any(c.attribute in TOPOLOGY_ATTRIBUTES for c in claim.constraints)


def _blame_constraints(claim: Claim, resolved: Sequence[ResolvedRequest], target: Target, where: Where,
                       inventory: FitInventory, error: DraConstructsError) -> None:
    """If the claim fits without its constraints, raise an error naming the constraint(s) no node meets."""
    from dataclasses import replace

    loose = replace(claim, constraints=())
    if _fit_failures(loose, target, inventory, _classes(resolved)) is not None:
        return  # the requests alone do not fit: the original error says why
    blamed = []
    for constraint in claim.constraints:
        if _fit_failures(replace(claim, constraints=(constraint,)), target, inventory, _classes(resolved)):
            blamed.append(constraint)
    described = "; ".join(
        f"{'distinctAttribute' if c.distinct else 'matchAttribute'} {c.attribute} over "
        f"{list(c.requests) if c.requests else 'all requests'}" for c in (blamed or claim.constraints))
    raise DraConstructsError(
        _where(where), "constraints", described,
        f"no node of the inventory can allocate the claim with this alignment ({described}); "
        f"without it the claim fits. {error.problem}",
        "ask for fewer aligned devices (the catalog's HGX node has 4 GPUs per NUMA node, 2 GPUs and 2 NICs "
        "per PCIe root), align fewer requests, or pass inventory= with your cluster's ResourceSlices",
    ) from None


_CLAIMS: dict[str, Claim] = {}


def _claim(spec: dict[str, Any], where: Where) -> Claim:
    key = json.dumps(spec, sort_keys=True)
    claim = _CLAIMS.get(key)
    if claim is None:
        from dra_constructs.fit import claim_from_spec

        claim = _CLAIMS[key] = claim_from_spec("claim", spec, _where(where))
    return claim


def _known_only(resolved: Sequence[ResolvedRequest]) -> bool:
    """The inventory speaks only for the NVIDIA and NIC classes: claims with other classes are not fit-checked."""
    return all(r.catalog_class() in KNOWN_CLASS_SELECTORS for _, alts in resolved for r, _ in alts)


def _nvidia_only(resolved: Sequence[ResolvedRequest]) -> bool:
    """Only NVIDIA classes (a claim with a NIC is checked on one node: the NICs sit beside the GPUs)."""
    return all(r.catalog_class() in DEVICE_CLASS_SELECTORS for _, alts in resolved for r, _ in alts)


def _classes(resolved: Sequence[ResolvedRequest]) -> dict[str, DeviceClass]:
    """Each request's class as the catalog class it narrows (a tenant class repeats the pins)."""
    from dra_constructs.fit import DeviceClass

    return {r.device_class(): DeviceClass(r.device_class(), (KNOWN_CLASS_SELECTORS[r.catalog_class()],))
            for _, alts in resolved for r, _ in alts}
