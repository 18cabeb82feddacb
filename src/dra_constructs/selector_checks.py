"""The hook where claim requests meet the CEL checker and the fit check (``dra_constructs.fit``).

For every request of a claim: each selector must pass the API server's checks for the target
version; no selector may fail at run time on a device of the inventory (the scheduler fails the
allocation then); and - with an inventory (the catalog's synthetic devices by default, static or
DynamicMIG by ``mig_mode``) - the structured allocator must find the whole claim a place on one
node: counters, constraints, ``firstAvailable`` and taints included.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dra_constructs.catalog import DEVICE_CLASS_SELECTORS, catalog_resource_slices
from dra_constructs.catalog.amd import AMD_DEVICE_CLASS, AMD_DEVICE_CLASS_SELECTOR
from dra_constructs.catalog.amd_devices import amd_resource_slices
from dra_constructs.catalog.network import NIC_CLASS_SELECTORS
from dra_constructs.errors import DraConstructsError
from dra_constructs.target import Target
from dra_constructs.validation import Where, _where

if TYPE_CHECKING:
    from dra_constructs.cel import Device
    from dra_constructs.fit import Claim, DeviceClass, NodeResult
    from dra_constructs.fit import Inventory as FitInventory
    from dra_constructs.requests import DeviceRequest, ResolvedRequest

__all__ = ["Inventory", "LazyCatalog", "as_fit_inventory", "catalog_inventory", "catalog_table", "check_requests"]

#: Devices (``dra_constructs.cel.Device``) or a fit inventory with pools and counter sets.
Inventory = Any

#: The DeviceClasses the catalog speaks for: the NVIDIA driver's and the network driver's NIC class.
KNOWN_CLASS_SELECTORS: dict[str, str] = {**DEVICE_CLASS_SELECTORS, **NIC_CLASS_SELECTORS,
                                         AMD_DEVICE_CLASS: AMD_DEVICE_CLASS_SELECTOR}
#: Alignment attributes whose constraint the catalog checks on one node (its nodes carry the topology).
TOPOLOGY_ATTRIBUTES = frozenset({"resource.kubernetes.io/pcieRoot", "resource.kubernetes.io/numaNode"})


@lru_cache(maxsize=4)
def catalog_inventory(mig_mode: str = "static", split: bool = False) -> FitInventory:
    """The catalog's GPUs (and NICs beside them) as a fit inventory: static MIG or DynamicMIG nodes.

    ``split``: counter sets in a slice of their own, as a 1.35+ cluster has them
    (``Target.counter_sets_in_own_slice``; the allocator of 1.35+ offers no device of a slice
    with ``sharedCounters``).
    """
    from dra_constructs.fit import Inventory as FitInventory

    slices = catalog_resource_slices(mig_mode="dynamic" if mig_mode == "dynamic" else "static", network=True,
                                     split_counter_sets=split and mig_mode == "dynamic")
    slices += amd_resource_slices()  # AMD partitions are pre-created: the same nodes in both MIG modes
    return FitInventory.from_slices(slices)


@dataclass(frozen=True)
class LazyCatalog:
    """The catalog inventory of one MIG mode, built only when :func:`catalog_table` cannot vouch.

    ``GpuClaimTemplate`` passes one for the default inventory (``CATALOG``): a claim made only
    of generated request shapes within the table's counts passes without the inventory (~0.12 s
    to build) and without evaluating its selectors on the catalog's devices (~0.15 s).
    """

    mig_mode: str
    split: bool = False

    def build(self) -> FitInventory:
        return catalog_inventory(self.mig_mode, self.split)


#: A generated request shape: (device class, selectors).
Shape = tuple[str, tuple[str, ...]]

#: Precomputed answers of the live check for the catalog's generated request shapes, per MIG mode
#: and target (``scripts/catalog_satisfiability.py`` writes it; tests/core/test_catalog_satisfiability.py
#: recomputes the entries with the allocator and the CEL evaluator).
CATALOG_TABLE_PATH = Path(__file__).with_name("catalog") / "satisfiability.json"


@lru_cache(maxsize=1)
def catalog_table() -> dict[tuple[str, int], dict[Shape, int | None]]:
    """(mig mode, target minor) -> shape -> the largest count that passes (``None``: a run-time error).

    A count from 1 to that number passes :func:`check_requests` against the catalog; above it,
    or with a run-time error of the selectors on some catalog device, the live check answers.
    """
    table = json.loads(CATALOG_TABLE_PATH.read_text())
    shapes: list[Shape] = [(device_class, tuple(selectors)) for device_class, selectors in table["shapes"]]
    answers: dict[tuple[str, int], dict[Shape, int | None]] = {}
    for key, counts in table["max_count"].items():
        mode, minor = key.split("/")
        answers[mode, int(minor)] = dict(zip(shapes, counts, strict=True))
    return answers


def generated_catalog_shapes() -> dict[Shape, DeviceRequest]:
    """Every request shape the catalog generates (each model, all models, each MIG profile), with a request."""
    from dra_constructs.catalog import GPU_SPECS
    from dra_constructs.requests import GpuRequest, MigRequest

    requests: list[DeviceRequest] = [GpuRequest(models=(spec.key,)) for spec in GPU_SPECS]
    requests += [GpuRequest(models=tuple(spec.key for spec in GPU_SPECS))]
    requests += [MigRequest(gpu=spec.key, profile=p.name) for spec in GPU_SPECS for p in spec.mig_profiles]
    shapes: dict[Shape, DeviceRequest] = {}
    for request in requests:
        shapes.setdefault((request.device_class(), tuple(request.generated_selectors("catalog"))), request)
    return shapes


def catalog_modes() -> list[tuple[str, int]]:
    """(mig mode, target minor) pairs a claim can be checked in against the catalog."""
    from dra_constructs.target import SUPPORTED_MINORS

    return [(mode, minor) for mode in ("static", "dynamic") for minor in SUPPORTED_MINORS
            if mode == "static" or Target(minor=minor).has_partitionable_devices]


def live_catalog_check(mig_mode: str, minor: int, shape: Shape, count: int) -> bool:
    """Whether one request of ``shape`` and ``count`` passes today's live check against the catalog."""
    from dra_constructs.requests import render_claim_spec

    request = generated_catalog_shapes()[shape].model_copy(update={"count": count})
    target = Target(minor=minor)
    spec, resolved = render_claim_spec([request], [], target, "catalog")
    try:
        check_requests(resolved, target, "catalog", catalog_inventory(mig_mode, target.counter_sets_in_own_slice),
                       spec, catalog=True)
    except DraConstructsError:
        return False
    return True


def live_catalog_answer(mig_mode: str, minor: int, shape: Shape) -> int | None:
    """The table's entry computed live: ``None`` on a run-time error, else the largest count that passes."""
    device_class, selectors = shape
    target = Target(minor=minor)
    if _runtime_error(device_class, selectors, target,
                      catalog_inventory(mig_mode, target.counter_sets_in_own_slice)) is not None:
        return None
    count = 0
    while live_catalog_check(mig_mode, minor, shape, count + 1):
        count += 1
    return count


def _catalog_vouches(resolved: Sequence[ResolvedRequest], spec: dict[str, Any], target: Target,
                     mig_mode: str) -> bool:
    """The table says the live check passes: each request a generated shape within its count, nothing else.

    The claim must be exactly what its requests render to without extras (no constraints, no
    firstAvailable, tolerations, admin access or config, no narrower class): then the live check
    looks at each request alone (the catalog's request-by-request check) and its answer depends
    only on the mode, the target's minor, the shape and the count. A patch release falls through.
    """
    if target.patch is not None:
        return False
    limits = catalog_table().get((mig_mode, target.minor))
    if limits is None:
        return False
    expected: list[dict[str, Any]] = []
    for name, alternatives in resolved:
        if len(alternatives) != 1:
            return False
        request, selectors = alternatives[0]
        device_class = request.device_class()
        limit = limits.get((device_class, tuple(selectors)))
        count = request.count
        if limit is None or request.catalog_class() != device_class or type(count) is not int \
                or not 1 <= count <= limit:
            return False
        body = {"deviceClassName": device_class, "selectors": [{"cel": {"expression": s}} for s in selectors],
                "allocationMode": "ExactCount", "count": count}
        expected.append({"name": name, "exactly": body} if target.wraps_requests_in_exactly else {"name": name, **body})
    return spec == {"devices": {"requests": expected}}


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


def _inventory_hint(catalog: bool) -> str:
    """The last resort of a fit error's fix, for what the user did: the catalog, or their own inventory."""
    if catalog:
        return "or pass inventory= with your cluster's ResourceSlices"
    return ("or check the inventory you passed (inventory= / set_inventory): it must hold the devices your cluster "
            "has, e.g. kubectl get resourceslices -o yaml")


def _error(where: Where, name: str, need: int, problem: str, catalog: bool = True) -> DraConstructsError:
    return DraConstructsError(
        _where(where), f"requests[{name!r}]", f"count={need}",
        f"no node of the inventory can allocate the claim: {problem}",
        "relax the selectors (NVML reports memory below the marketed size, e.g. an H100 80GB has 79.65Gi), "
        f"lower count, {_inventory_hint(catalog)}",
    )


def _need(request: DeviceRequest) -> int:
    return 1 if getattr(request, "allocation_mode", "ExactCount") == "All" else int(request.count)


def _check_fit(claim: Claim, resolved: Sequence[ResolvedRequest], target: Target, where: Where,
               inventory: FitInventory, whole: bool, catalog: bool = True) -> None:
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
        raise _error(where, name, _need(request), _problem(failures, request, selectors, target, inventory),
                     catalog)
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
                raise _error(where, name, _need(request), problem, catalog)
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
    A :class:`LazyCatalog` inventory is answered from :func:`catalog_table` where it vouches
    (generated shapes only, counts within the table's), else built and checked live.
    """
    for _, alternatives in resolved:
        for request, selectors in alternatives:
            for expression in selectors:
                _check_expression(where, request.name, expression, target)
    if inventory is None:
        return
    # The same claim against the same inventory passes again: one dict lookup per construct.
    inventory_key = inventory if isinstance(inventory, LazyCatalog) else id(inventory)
    passed_key = (repr(spec), target, inventory_key, catalog) if spec is not None else None
    if passed_key is not None and passed_key in _PASSED:
        return
    if isinstance(inventory, LazyCatalog):
        if catalog and spec is not None and passed_key is not None \
                and _catalog_vouches(resolved, spec, target, inventory.mig_mode):
            _PASSED[passed_key] = inventory
            return
        inventory = inventory.build()  # the table cannot vouch: the live check answers (and words any error)
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
            _check_fit(claim, resolved, target, where, fit_inventory, whole=whole, catalog=catalog)
        except DraConstructsError as error:
            if claim.constraints:
                _blame_constraints(claim, resolved, target, where, fit_inventory, error, catalog)
            raise
    if passed_key is not None:
        _PASSED[passed_key] = inventory  # keeps the inventory alive, so its id stays its own


_PASSED: dict[tuple[Any, ...], Any] = {}


def _aligned(claim: Claim) -> bool:
    """A topology constraint: the catalog checks such a claim on one node (each node has the topology)."""
    return any(c.attribute in TOPOLOGY_ATTRIBUTES for c in claim.constraints)


def _blame_constraints(claim: Claim, resolved: Sequence[ResolvedRequest], target: Target, where: Where,
                       inventory: FitInventory, error: DraConstructsError, catalog: bool = True) -> None:
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
        ("ask for fewer aligned devices (the catalog's HGX node has 4 GPUs per NUMA node, 2 GPUs and 2 NICs "
         "per PCIe root), align fewer requests, " if catalog else
         "ask for fewer aligned devices, align fewer requests, ") + _inventory_hint(catalog),
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
