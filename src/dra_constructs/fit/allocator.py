"""An allocator for the claims of one Pod on one node, the way the scheduler's is written.

It follows ``k8s.io/dynamic-resource-allocation/structured`` (the ``incubating`` variant,
``allocator_incubating.go`` and ``pools_incubating.go``): pools gathered per node (highest
generation; incomplete or invalid pools are skipped, and fail ``allocationMode: All``), claims
in order, requests in order, ``firstAvailable`` alternatives in order, devices in pool / slice /
device order, each request trying combinations (never permutations) of its devices, a device
given to one claim of the Pod at most (admin access excepted), counters of shared counter sets
(minus what allocated devices consume), device taints against the request's tolerations,
``matchAttribute`` / ``distinctAttribute`` constraints, binding conditions and the feature gates.
The first full solution wins, as in the scheduler.

Two things the upstream search does not do keep it fast without changing the answer: identical
consecutive claims take their first devices in increasing order (any solution can be reordered
so), and a bound cuts a branch when the counters left cannot hold the devices still needed
(each device of a counter set consumes at least the smallest consumption of every counter all
candidates share). A step budget plays the part of the scheduler's filter timeout.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from dra_constructs.cel.matching import CelRuntimeError, explain_no_match, selector_matcher
from dra_constructs.fit.capacity import (
    NotRepresentable,
    consumed_amount,
    device_capacities,
    format_quantity,
    resolve_requests,
    violates_policy,
)
from dra_constructs.fit.model import Claim, Constraint, DeviceClass, FitDevice, Inventory, Node, Pool, SubRequest
from dra_constructs.fit.packing import Packing, PackingGroup
from dra_constructs.fit.pools import PoolIndex, counter_set_slice, invalid_reason, node_pools
from dra_constructs.target import Target

__all__ = ["ALLOCATION_RESULTS_MAX_SIZE", "AllocatedState", "Allocator", "DeviceResult", "NodeResult"]

#: ``resourceapi.AllocationResultsMaxSize``: devices per claim.
ALLOCATION_RESULTS_MAX_SIZE = 32
#: Why a device is refused when existing shares hold capacity of a device without allowMultipleAllocations.
SHARED_UNSHAREABLE = ("capacity held by existing shares (shareID in --allocated) of a device that is not "
                      "allowMultipleAllocations")
#: The scheduler's filter timeout: ``DynamicResourcesArgs.filterTimeout``, 10 s by default
#: (``DRASchedulerFilterTimeout``, beta and on from 1.34); past it the node is unschedulable.
SCHEDULER_FILTER_TIMEOUT_S = 10
#: ``allocateOne`` calls the scheduler makes a second (issue 24: an exact packing of ~52,000 calls
#: took it about 1 s).
SCHEDULER_STEPS_PER_SECOND = 50_000
#: Search steps per node before ``fit`` gives up: what the scheduler does within its filter
#: timeout. Each step here is one the scheduler takes too (the same order; only branches with no
#: solution are cut), so a search longer than this is longer than the scheduler's timeout there.
DEFAULT_STEP_BUDGET = SCHEDULER_FILTER_TIMEOUT_S * SCHEDULER_STEPS_PER_SECOND
#: Steps of plain search before the exact packing check joins in: searches that end sooner
#: (nearly all) do not pay for it.
PACKING_AFTER = 50


@dataclass
class AllocatedState:
    """Devices already allocated in the cluster (admin-access results do not count).

    The scheduler's ``AllocatedState`` (``k8s.io/dynamic-resource-allocation/structured/schedulerapi/
    types.go``), filled as ``foreachAllocatedDevice`` (``pkg/scheduler/framework/plugins/
    dynamicresources/allocateddevices.go``) fills it: ``devices`` are the dedicated results
    (``AllocatedDevices``); ``shares`` maps a device to the ``shareID`` of each result that has one
    (``AllocatedSharedDeviceIDs``) and ``capacity`` sums their ``consumedCapacity``
    (``AggregatedCapacity``). A shared result counts as shared only with DRAConsumableCapacity on
    (:meth:`resolved`); with the gate off the scheduler takes it as dedicated.
    """

    devices: set[str] = field(default_factory=set)
    capacity: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    shares: dict[str, set[str]] = field(default_factory=dict)

    def copy(self) -> AllocatedState:
        return AllocatedState(set(self.devices), {k: dict(v) for k, v in self.capacity.items()},
                              {k: set(v) for k, v in self.shares.items()})

    def resolved(self, consumable_capacity: bool) -> AllocatedState:
        """The state the allocator sees: with DRAConsumableCapacity off every share is a dedicated result."""
        if consumable_capacity or not (self.shares or self.capacity):
            return self
        return AllocatedState(self.devices | set(self.shares) | set(self.capacity))

    def shared(self, device_id: str) -> bool:
        """Whether committed shares hold the device (``internal.IsDeviceAllocated``, shared half)."""
        return device_id in self.shares or device_id in self.capacity


@dataclass(frozen=True)
class DeviceResult:
    """One allocated device, as ``DeviceRequestAllocationResult`` names it."""

    claim: str
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    consumed: tuple[tuple[str, Fraction], ...] = ()
    #: A share of an ``allowMultipleAllocations`` device (the scheduler gives it a ``shareID``).
    share: bool = False

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"

    def as_json(self) -> dict[str, Any]:
        """The result's fields; a shared device's ``consumedCapacity`` as quantity strings."""
        body: dict[str, Any] = {"claim": self.claim, "request": self.request, "driver": self.driver,
                                "pool": self.pool, "device": self.device}
        if self.consumed:
            body["consumedCapacity"] = {name: format_quantity(amount) for name, amount in self.consumed}
        return body


@dataclass
class NodeResult:
    """The outcome on one node: the devices of the first solution, or why there is none."""

    node: str
    allocatable: bool
    devices: list[DeviceResult] = field(default_factory=list)
    reason: str | None = None
    steps: int = 0
    #: The claim and request the reason is about (``None`` for node-wide errors).
    failed: tuple[str, str] | None = None
    #: Whether no device of the node matches the failed request at all.
    no_match: bool = False


class _Stop(Exception):
    """Allocation cannot continue on this node (``errStop`` / an allocation error)."""


class _OverLimit(Exception):
    """``errAllocationResultMaxSizeExceeded``."""


@dataclass
class _Alt:
    """One request or alternative of one claim, resolved against the node's devices."""

    claim_index: int
    request_name: str  # the result's request name ("req" or "req/sub")
    base: str
    sub: str
    spec: SubRequest
    class_selectors: tuple[str, ...]
    candidates: list[int]  # positions of selectable devices (and of those whose CEL fails)
    errors: dict[int, str]
    all_devices: list[int] | None = None

    @property
    def admin(self) -> bool:
        return bool(self.spec.admin_access)

    @property
    def need(self) -> int:
        return len(self.all_devices) if self.all_devices is not None else self.spec.count


class _ConstraintState:
    def __init__(self, constraint: Constraint, compare_distinct: bool = True) -> None:
        self.constraint = constraint
        self.compare_distinct = compare_distinct  # False: the 1.34 allocator (see Target)
        self.names = set(constraint.requests)
        self.value: Any = None
        self.count = 0
        self.seen: Counter[Any] = Counter()

    def applies(self, base: str, sub: str) -> bool:
        return not self.names or base in self.names or (bool(sub) and f"{base}/{sub}" in self.names)

    def add(self, base: str, sub: str, device: FitDevice) -> bool:
        if not self.applies(base, sub):
            return True
        value = _attribute(device, self.constraint.attribute)
        if value is None:
            return False
        if self.constraint.distinct:
            if self.seen[value] and self.compare_distinct:
                return False
            self.seen[value] += 1
            return True
        if self.count and value != self.value:
            return False
        if not self.count:
            self.value = value
        self.count += 1
        return True

    def remove(self, base: str, sub: str, device: FitDevice) -> None:
        if not self.applies(base, sub):
            return
        if self.constraint.distinct:
            value = _attribute(device, self.constraint.attribute)
            self.seen[value] -= 1
        else:
            self.count -= 1


def _attribute(device: FitDevice, name: str) -> tuple[str, Any] | None:
    """``lookupAttribute``: the fully qualified name, or the plain name under the driver's domain."""
    attributes = device.device.attributes
    value = attributes.get(name)
    if value is None:
        domain, _, plain = name.partition("/")
        if not plain or domain != device.device.driver:
            return None
        value = attributes.get(plain)
    if not value:
        return None
    kind, raw = next(iter(value.items()))
    return (kind, raw) if kind in ("int", "bool", "string", "version") else None


def _tolerated(taint: Mapping[str, Any], spec: SubRequest) -> bool:
    return any(t.tolerates(taint) for t in spec.tolerations)


class Allocator:
    """Allocate the claims of one Pod against an inventory, node by node."""

    def __init__(self, inventory: Inventory, classes: Mapping[str, DeviceClass], gates: Mapping[str, bool],
                 target: Target, allocated: AllocatedState | None = None,
                 step_budget: int = DEFAULT_STEP_BUDGET, upstream_quirks: bool = True,
                 packing_after: int | None = PACKING_AFTER) -> None:
        self.inventory = inventory
        self.classes = classes
        self.gates = gates
        self.target = target
        self.allocated = (allocated or AllocatedState()).resolved(self.gate("DRAConsumableCapacity"))
        self.step_budget = step_budget
        #: Mirror the upstream allocator where it departs from the plain rules (see ``_try``).
        self.upstream_quirks = upstream_quirks
        #: Steps of plain search before the exact packing check (``fit/packing.py``) cuts branches
        #: (``None``: never); it never changes the answer, only how many steps find it.
        self.packing_after = packing_after
        self._matches: dict[str, dict[int, bool | str]] = {}
        self._matchers: dict[str, Any] = {}
        self._available: dict[int, dict[str, dict[str, Fraction]]] = {}
        self._index: PoolIndex | None = None

    def gate(self, name: str) -> bool:
        return bool(self.gates.get(name, False))

    # --- per node ------------------------------------------------------------------------

    def candidate_pools(self, node: Node) -> list[Pool]:
        """The inventory's pools that may have slices for ``node`` (``fit/pools.py::PoolIndex``)."""
        if self._index is None or not self._index.fresh(self.inventory.pools):
            self._index = PoolIndex(self.inventory.pools)
        return self._index.candidates(node)

    def allocate(self, claims: Sequence[Claim], node: Node) -> NodeResult:
        """The first solution on ``node`` (``Allocate``), or the reason there is none."""
        return _NodeSearch(self, claims, node).run()

    def matches(self, device_class: DeviceClass, selectors: tuple[str, ...],
                devices: Sequence[FitDevice]) -> list[bool | str]:
        """CEL results of the class's then the request's selectors per device, in the allocator's
        order: the first ``false`` excludes, the first run-time error is the result (as a string).
        Each expression runs once per device (cached across requests and nodes)."""
        results: list[bool | str] = [True] * len(devices)
        for expression in (*device_class.selectors, *selectors):
            cache = self._matches.get(expression)
            if cache is None:
                cache = self._matches[expression] = {}
                self._matchers[expression] = selector_matcher(expression, self.target)
            matcher = self._matchers[expression]
            for index, device in enumerate(devices):
                if results[index] is not True:
                    continue
                found = cache.get(id(device))
                if found is None:
                    try:
                        found = matcher(device.device)
                    except CelRuntimeError as error:
                        found = f"error: {error}"
                    cache[id(device)] = found
                results[index] = found
        return results

    def available_counters(self, pool: Pool) -> dict[str, dict[str, Fraction]]:
        """The pool's counter sets minus what allocated devices consume (``checkAvailableCounters``)."""
        cached = self._available.get(id(pool))
        if cached is not None:
            return cached
        available = {name: dict(counters) for name, counters in pool.counter_sets.items()}
        charges_shares = self.target.allocator_charges_committed_share_counters
        for slice_ in pool.slices:
            for device in slice_.devices:
                # Committed shares charge a device's counters once, from 1.36.2 (upstream
                # ``internal.IsDeviceAllocated`` in ``checkAvailableCounters``); before, only
                # dedicated results did (``AllocatedDevices.Has``) and the counters were overdrawn.
                if device.id not in self.allocated.devices and not (
                        charges_shares and self.allocated.shared(device.id)):
                    continue
                for counter_set, counters in device.consumes:
                    target = available.get(counter_set)
                    if target is None:
                        continue
                    for name, value in counters:
                        if name in target:
                            target[name] -= value
        self._available[id(pool)] = available
        return available


class _NodeSearch:
    """The state of one ``Allocate`` call on one node."""

    def __init__(self, allocator: Allocator, claims: Sequence[Claim], node: Node) -> None:
        self.a = allocator
        self.claims = list(claims)
        self.node = node
        self.devices: list[FitDevice] = []
        self.pool_ok: list[bool] = []
        self.pools: list[Pool] = []
        #: Invalid pools for this node and why (``Pool.InvalidReason``).
        self.invalid: dict[str, str] = {}
        #: Slices in the 1.34 combined layout (sharedCounters and devices) read at 1.35+: name, devices.
        self.ignored: list[tuple[str, int]] = []
        self.alts: dict[tuple[int, int], list[_Alt]] = {}
        self.constraints: list[list[_ConstraintState]] = []
        self.allocating: dict[int, set[int]] = {}
        self.capacity_in_use: dict[int, dict[str, Fraction]] = {}
        self.consumed: dict[tuple[int, str], dict[str, Fraction]] = {}
        self.results: list[list[DeviceResult]] = [[] for _ in self.claims]
        self.undo: list[list[tuple[int, bool, bool]]] = [[] for _ in self.claims]
        self.first_position: list[int | None] = [None for _ in self.claims]
        self.steps = 0
        self.deepest = -1
        self.deepest_reason: tuple[int, str, Counter[str], str] | None = None
        self.multi = allocator.gate("DRAConsumableCapacity")
        self._alone_cache: dict[tuple[SubRequest, tuple[str, ...]], str | None] = {}
        self._candidates: dict[tuple[str, tuple[str, ...], bool], tuple[list[int], dict[int, str]]] = {}
        self._group_cache: dict[frozenset[int], tuple[int, list[tuple[tuple[int, str], int, dict[str, Any]]]]] = {}
        self._suffix_cache: dict[tuple[int, int, int], list[tuple[frozenset[int], int]]] = {}
        self._failed: set[Any] = set()
        self._packing: Packing | None = None
        #: Failed branches change the state (:meth:`_failures_leave_traces`): no cut may skip one.
        self._traces = False
        self.packing_after = allocator.packing_after or 0
        self._demands: dict[tuple[int, int, int], tuple[tuple[frozenset[int], ...], list[int], int | None]] = {}

    # --- setup -----------------------------------------------------------------------------

    def _gather(self) -> None:
        """``GatherPools`` (``fit/pools.py`` has the invalid-pool and counter-set-slice rules)."""
        partitionable = self.a.gate("DRAPartitionableDevices")
        split = self.a.target.counter_sets_in_own_slice
        for pool, slices in node_pools(self.a.candidate_pools(self.node), self.node, partitionable, split,
                                       self.a.target.allocator_sorts_pools):
            self.pools.append(pool)
            reason = invalid_reason(pool, slices, partitionable, split)
            if reason is not None:
                self.invalid[pool.key] = reason
            skipped = pool.incomplete and self.a.target.allocator_skips_incomplete_pools  # through 1.34: usable
            usable = reason is None and not skipped
            for slice_ in slices:
                if split and slice_.counter_set_names and slice_.devices:
                    self.ignored.append((slice_.name, len(slice_.devices)))
                if counter_set_slice(slice_, partitionable, split):
                    continue
                for device in slice_.devices:
                    if slice_.per_device and not (device.node_selection and device.node_selection.matches(self.node)):
                        continue
                    self.devices.append(device)
                    self.pool_ok.append(usable)

    def _resolve(self) -> None:
        total = 0
        for claim_index, claim in enumerate(self.claims):
            minimum = 0
            for request_index, request in enumerate(claim.requests):
                if request.first_available and not self.a.gate("DRAPrioritizedList"):
                    raise _Stop(f"claim {claim.name}, request {request.name}: has subrequests, but the "
                                "DRAPrioritizedList feature is disabled")
                alts = [self._alt(claim_index, claim, request.name, sub, request.first_available)
                        for sub in request.alternatives]
                self.alts[(claim_index, request_index)] = alts
                minimum += min(alt.need for alt in alts)
            if minimum > ALLOCATION_RESULTS_MAX_SIZE:
                raise _Stop(f"claim {claim.name}: number of requested devices {minimum} exceeds the claim limit "
                            f"of {ALLOCATION_RESULTS_MAX_SIZE}")
            compare = self.a.target.distinct_attribute_compares_values
            self.constraints.append([_ConstraintState(c, compare) for c in claim.constraints])
            for constraint in claim.constraints:
                if constraint.distinct and not self.a.gate("DRAConsumableCapacity"):
                    raise _Stop(f"claim {claim.name}: distinctAttribute needs the DRAConsumableCapacity feature")
            total += minimum

    def _alt(self, claim_index: int, claim: Claim, base: str, spec: SubRequest, sub: bool) -> _Alt:
        name = f"{base}/{spec.name}" if sub else base
        if spec.admin_access is not None and not self.a.gate("DRAAdminAccess"):
            raise _Stop(f"claim {claim.name}, request {name}: admin access is requested, but the feature is disabled")
        if spec.capacity and not self.a.gate("DRAConsumableCapacity"):
            raise _Stop(f"claim {claim.name}, request {name}: has capacity requests, but the DRAConsumableCapacity "
                        "feature is disabled")
        device_class = self.a.classes.get(spec.device_class)
        if device_class is None:
            raise _Stop(f"claim {claim.name}, request {name}: could not retrieve device class {spec.device_class}: "
                        "not found")
        binding = self.a.gate("DRADeviceBindingConditions") and self.a.gate("DRAResourceClaimDeviceStatus")
        key = (spec.device_class, spec.selectors, binding)
        cached = self._candidates.get(key)
        if cached is None:
            cached = self._candidates[key] = self._select(device_class, spec, binding)
        candidates, errors = cached
        alt = _Alt(claim_index, name, base, spec.name if sub else "", spec, device_class.selectors, candidates, errors)
        if spec.mode == "All":
            for pool in self.pools:
                if pool.incomplete:
                    raise _Stop(f"claim {claim.name}, request {name}: asks for all devices, but resource pool "
                                f"{pool.key} is currently being updated")
                if pool.key in self.invalid:
                    raise _Stop(f"claim {claim.name}, request {name}: asks for all devices, but resource pool "
                                f"{pool.key} is currently invalid")
            if errors:
                position = min(errors)
                raise _Stop(f"claim {claim.name}: request {name} on device {self.devices[position].id}: "
                            f"CEL runtime error: {errors[position]}")
            alt.all_devices = [p for p in candidates if self._capacity_fits(p, spec)]
        return alt

    def _select(self, device_class: DeviceClass, spec: SubRequest, binding: bool) -> tuple[list[int], dict[int, str]]:
        """Positions of the devices the request selects (``isSelectable``), and CEL errors by position."""
        results = self.a.matches(device_class, spec.selectors, self.devices)
        candidates: list[int] = []
        errors: dict[int, str] = {}
        for position, result in enumerate(results):
            if self.devices[position].binding_conditions and not binding:
                continue
            if isinstance(result, str):
                errors[position] = result.removeprefix("error: ")
                candidates.append(position)
            elif result:
                candidates.append(position)
        return candidates, errors

    # --- run -------------------------------------------------------------------------------

    def run(self) -> NodeResult:
        try:
            self._gather()
            self._resolve()
            self._traces = self._failures_leave_traces()
            self._packing = self._make_packing() if self.a.packing_after is not None else None
            done = self._one(0, 0, 0, 0, False, 0)
        except _Stop as stop:
            return NodeResult(self.node.name, False, reason=str(stop), steps=self.steps)
        except _OverLimit:
            done = False
        if done:
            devices = [r for claim in self.results for r in claim]
            return NodeResult(self.node.name, True, devices, steps=self.steps)
        self.failed: tuple[str, str] | None = None
        self.no_match = False
        reason = self._explain()
        if self.invalid:  # upstream: "invalid resource pools were encountered" when allocation fails
            reason = ("invalid resource pools were encountered (" + "; ".join(
                f"pool {key}: {why}" for key, why in self.invalid.items()) + "; none of their devices is "
                "allocated): " + reason)
        if self.ignored:
            reason += "; " + "; ".join(
                f"slice {name} has both sharedCounters and {count} device(s): from 1.35 the allocator reads it as a "
                "counter-set slice and offers none of its devices (the API server of 1.35+ rejects such a slice; "
                "publish the devices in a slice of their own)" for name, count in self.ignored)
        return NodeResult(self.node.name, False, reason=reason, steps=self.steps, failed=self.failed,
                          no_match=self.no_match)

    def _step(self) -> None:
        self.steps += 1
        if self.steps > self.a.step_budget:
            raise _Stop(f"gave up after {self.a.step_budget:,} search steps: the scheduler's search takes at least "
                        f"as many and would pass its filter timeout ({SCHEDULER_FILTER_TIMEOUT_S} s, filterTimeout of "
                        f"DynamicResources, ~{SCHEDULER_STEPS_PER_SECOND:,} steps a second), leaving the node "
                        "unschedulable: simplify the claims or split the Pod")

    def _one(self, claim: int, request: int, sub: int, device: int, in_sub: bool, start: int) -> bool:
        """``allocateOne``."""
        self._step()
        if claim >= len(self.claims):
            return True
        if request >= len(self.claims[claim].requests):
            try:
                return self._next_claim(claim + 1)
            except _OverLimit:
                return False
        alts = self.alts[(claim, request)]
        if not in_sub and self.claims[claim].requests[request].first_available:
            all_over = True
            for index in range(len(alts)):
                try:
                    if self._one(claim, request, index, 0, True, 0):
                        return True
                    all_over = False
                except _OverLimit:
                    continue
            if all_over:
                raise _OverLimit
            return False
        alt = alts[sub]
        if alt.all_devices is not None and not alt.all_devices:
            self._record_failure(claim, alt, Counter({"no device matches": 1}))
            return False
        if device >= alt.need:
            return self._one(claim, request + 1, 0, 0, False, 0)
        if len(self.results[claim]) + alt.need - device > ALLOCATION_RESULTS_MAX_SIZE:
            raise _OverLimit
        if alt.all_devices is not None:
            position = alt.all_devices[device]
            ok = self._allocate(claim, alt, position, must=True)
            if not ok:
                self._record_failure(claim, alt, Counter({f"{self.devices[position].id} is not available": 1}))
                return False
            if self._one(claim, request, sub, device + 1, in_sub, 0):
                return True
            self._deallocate(claim, alt, position)
            return False
        if device == 0 and not self._traces and not self._bound_ok(claim, request, sub, device):
            return False
        if self._packing is not None and self.steps > self.packing_after and not self._packs(
                claim, request, sub, device, alt):
            return False
        low = start
        if request == 0 and device == 0 and claim > 0 and self._same_as_previous(claim):
            previous = self.first_position[claim - 1]
            if previous is not None:
                low = max(low, previous)
        why: Counter[str] = Counter()
        for position in alt.candidates:
            if position < low:
                continue
            if not self.pool_ok[position]:
                continue
            fit = self.devices[position]
            if alt.admin and claim in self.allocating.get(position, ()):
                why["in use by the same claim"] += 1
                continue
            if not alt.admin and self._in_use(position):
                why["already allocated"] += 1
                continue
            error = alt.errors.get(position)
            if error is not None:
                raise _Stop(f"claim {self.claims[claim].name}: request {alt.request_name} on device {fit.id}: "
                            f"CEL runtime error: {error}")
            if not self._capacity_fits(position, alt.spec):
                if not fit.allow_multiple and self.a.allocated.shared(fit.id):
                    # A share (shareID) of a device that does not allow multiple allocations: the
                    # scheduler does not count it as in use, but its consumedCapacity still counts
                    # against the device's capacity (``CmpRequestOverCapacity`` reads AggregatedCapacity).
                    why[SHARED_UNSHAREABLE] += 1
                else:
                    why["capacity"] += 1
                continue
            blocked = self._try(claim, alt, position)
            if blocked:
                why[blocked] += 1
                continue
            if request == 0 and device == 0:
                self.first_position[claim] = position
            if self._one(claim, request, sub, device + 1, in_sub, position + 1):
                return True
            self._deallocate(claim, alt, position)
        self._record_failure(claim, alt, why)
        return False

    def _next_claim(self, claim: int) -> bool:
        """Start ``claim``, unless the same state (devices taken, counters used, symmetry bound)
        already failed from here: the claims left see exactly the same problem again."""
        if claim >= len(self.claims):
            return self._one(claim, 0, 0, 0, False, 0)
        low = self.first_position[claim - 1] if claim > 0 and self._same_as_previous(claim) else None
        key = (claim, low, frozenset(p for p, users in self.allocating.items() if users),
               frozenset((k, tuple(sorted(v.items()))) for k, v in self.capacity_in_use.items()),
               frozenset((k, tuple(sorted(v.items()))) for k, v in self.consumed.items()))
        if key in self._failed:
            return False
        if self._one(claim, 0, 0, 0, False, 0):
            return True
        # sound even where failed branches keep refused counters (``_traces``): a search that kept
        # any leaves more counters consumed, so its state (this key) never comes back
        if len(self._failed) < 1 << 18:
            self._failed.add(key)
        return False

    def _same_as_previous(self, claim: int) -> bool:
        one, other = self.claims[claim], self.claims[claim - 1]
        if one.requests != other.requests or one.constraints != other.constraints:
            return False
        return all(alt.all_devices is None and not alt.admin for alt in self.alts[(claim, 0)])

    # --- one device ------------------------------------------------------------------------

    def _in_use(self, position: int) -> bool:
        return self.devices[position].id in self.a.allocated.devices or bool(self.allocating.get(position))

    def _is_multi(self, position: int) -> bool:
        return self.multi and self.devices[position].allow_multiple

    def _capacity_fits(self, position: int, spec: SubRequest) -> bool:
        """``CmpRequestOverCapacity``: with DRAConsumableCapacity on, upstream checks it on *every*
        selectable device, exclusive ones included (``allocator_incubating.go``: ``if
        alloc.features.ConsumableCapacity`` before ``allocateDevice``, not only for
        ``allowMultipleAllocations``): a request the ``requestPolicy`` refuses, above the
        capacity, or naming a capacity the device lacks, skips an unshared device too."""
        if not self.multi:
            return True
        return self._consumption(position, spec) is not None

    def _consumption(self, position: int, spec: SubRequest) -> dict[str, Fraction] | None:
        """What a shared (``allowMultipleAllocations``) device gives this request, if it fits.

        ``cmpRequestOverCapacity`` (upstream ``structured/internal/incubating/consumable_capacity.go``):
        every capacity of the device is consumed, rounded up by its ``requestPolicy``
        (``calculateConsumedCapacity``); a rounded amount the policy refuses (``violatesPolicy``)
        or one that overruns what is left skips the device; an unrepresentable request aborts.
        """
        device = self.devices[position]
        used = self.a.allocated.capacity.get(device.id, {})
        pending = self.capacity_in_use.get(position, {})
        capacity = device_capacities(device.capacity, device.device.driver)
        consumed: dict[str, Fraction] = {}
        try:
            wanted = resolve_requests(spec.capacity, device.capacity, device.device.driver)
            if wanted is None:  # asks for a capacity the device lacks
                return None
            for name, total in capacity.items():
                consumed[name] = consumed_amount(wanted.get(name), total, device.request_policies.get(name))
        except NotRepresentable as error:
            raise _Stop(f"request {spec.name} on device {device.id}: {error}") from None
        for name, total in capacity.items():
            amount = consumed[name]
            if violates_policy(amount, device.request_policies.get(name)):
                return None
            if used.get(name, 0) + pending.get(name, 0) + amount > total:
                return None
        return consumed

    def _try(self, claim: int, alt: _Alt, position: int) -> str | None:
        """``allocateDevice``; ``None`` on success, else why the device was refused."""
        fit = self.devices[position]
        multi = self._is_multi(position)
        if fit.consumes and not self.a.gate("DRAPartitionableDevices"):
            return "consumes counters, but DRAPartitionableDevices is off"
        skip_counters = multi and self.a.target.shared_devices_charge_counters_once and (
            fit.id in self.a.allocated.capacity or position in self.capacity_in_use)
        took = False
        if fit.consumes and not skip_counters:
            over = self._take_counters(position)
            if over is not None:
                return over
            took = True

        def refuse(reason: str) -> str:
            # Upstream through 1.35 keeps the counters of a device refused after its counter check
            # (taint, constraint) consumed for the rest of the Allocate call; mirrored unless told not to.
            if took and not (self.a.upstream_quirks and self.a.target.allocator_keeps_refused_counters):
                self._give_counters(position)
            return reason

        if self.a.gate("DRADeviceTaints"):
            for taint in fit.taints:
                if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(taint, alt.spec):
                    return refuse(f"taint {taint.get('key')}={taint.get('value', '')}:{taint.get('effect')} "
                                  "not tolerated")
        base, sub = alt.base, alt.sub
        states = self.constraints[claim]
        for index, state in enumerate(states):
            if not state.add(base, sub, fit):
                for earlier in states[:index]:
                    earlier.remove(base, sub, fit)
                if alt.all_devices is not None:
                    raise _Stop(f"claim {self.claims[claim].name}, request {alt.spec.name}: cannot add device "
                                f"{fit.id} because a claim constraint would not be satisfied")
                return refuse(f"constraint {state.constraint.attribute}")
        consumed: tuple[tuple[str, Fraction], ...] = ()
        self.undo[claim].append((position, multi, took))
        if multi:
            amounts = self._consumption(position, alt.spec) or {}
            pending = self.capacity_in_use.setdefault(position, {})
            for name, amount in amounts.items():
                pending[name] = pending.get(name, 0) + amount
            consumed = tuple(amounts.items())
        else:
            self.allocating.setdefault(position, set()).add(claim)
        self.results[claim].append(DeviceResult(
            self.claims[claim].name, alt.request_name, fit.device.driver, fit.device.pool, fit.device.name,
            alt.admin, consumed, multi))
        return None

    def _allocate(self, claim: int, alt: _Alt, position: int, must: bool) -> bool:
        if not alt.admin and self._in_use(position):
            return False
        if alt.admin and claim in self.allocating.get(position, ()):
            return False
        return self._try(claim, alt, position) is None

    def _deallocate(self, claim: int, alt: _Alt, position: int) -> None:
        fit = self.devices[position]
        result = self.results[claim].pop()
        _, multi, took_counters = self.undo[claim].pop()
        for state in self.constraints[claim]:
            state.remove(alt.base, alt.sub, fit)
        if multi:
            pending = self.capacity_in_use.get(position, {})
            for name, amount in result.consumed:
                pending[name] -= amount
            if not any(pending.values()):
                self.capacity_in_use.pop(position, None)
        else:
            self.allocating[position].discard(claim)
        if took_counters:
            self._give_counters(position)

    def _take_counters(self, position: int) -> str | None:
        fit = self.devices[position]
        available = self.a.available_counters(fit.pool)
        pool_id = id(fit.pool)
        taken: list[tuple[dict[str, Fraction], str, Fraction]] = []
        over: str | None = None
        for counter_set, counters in fit.consumes:
            if counter_set not in available:
                continue
            consumed = self.consumed.setdefault((pool_id, counter_set), {})
            limits = available[counter_set]
            for name, value in counters:
                if name not in limits:
                    continue
                now = consumed.get(name, 0) + value
                consumed[name] = now
                taken.append((consumed, name, value))
                if now > limits[name] and over is None:
                    over = f"counter {name} of {counter_set} exhausted"
        if over is not None:
            for consumed, name, value in taken:
                consumed[name] -= value
        return over

    def _give_counters(self, position: int) -> None:
        fit = self.devices[position]
        available = self.a.available_counters(fit.pool)
        for counter_set, counters in fit.consumes:
            if counter_set not in available:
                continue
            consumed = self.consumed[(id(fit.pool), counter_set)]
            for name, value in counters:
                if name in available[counter_set]:
                    consumed[name] -= value

    def _over(self, position: int) -> str | None:
        """The counter this device would overdraw now (``None``: it fits)."""
        fit = self.devices[position]
        if not fit.consumes:
            return None
        available = self.a.available_counters(fit.pool)
        for counter_set, counters in fit.consumes:
            limits = available.get(counter_set)
            if limits is None:
                continue
            consumed = self.consumed.get((id(fit.pool), counter_set), {})
            for name, value in counters:
                if name in limits and consumed.get(name, 0) + value > limits[name]:
                    return f"counter {name} of {counter_set} exhausted"
        return None

    # --- pruning ---------------------------------------------------------------------------

    def _remaining(self, claim: int, request: int, sub: int, device: int) -> list[tuple[frozenset[int], int]]:
        """(candidates, devices still needed) of every exclusive request from here on."""
        demands: list[tuple[frozenset[int], int]] = []
        for c in range(claim, len(self.claims)):
            for r in range(request if c == claim else 0, len(self.claims[c].requests)):
                alts = self.alts[(c, r)]
                if c == claim and r == request:
                    alts = [alts[sub]]
                if any(alt.admin or alt.all_devices is not None for alt in alts):
                    continue
                need = min(alt.need for alt in alts) - (device if (c, r) == (claim, request) else 0)
                union = frozenset(p for alt in alts for p in alt.candidates)  # errors too: reaching them fails
                demands.append((union, need))
        return demands

    def _capacity_of(self, positions: Iterable[int], why: Counter[str] | None = None) -> tuple[int, str | None]:
        """An upper bound on how many of ``positions`` can still be allocated together."""
        groups: dict[tuple[int, str], list[int]] = {}
        loose = 0
        why = why if why is not None else Counter()
        for position in positions:
            if not self.pool_ok[position]:
                why["in an incomplete or invalid pool"] += 1
                continue
            if self._in_use(position):
                why["already allocated"] += 1
                continue
            fit = self.devices[position]
            if self._is_multi(position):
                return 1 << 30, None
            over = self._over(position)
            if over is not None:
                why[over] += 1
                continue
            available = self.a.available_counters(fit.pool)
            key = next(((id(fit.pool), s) for s, _ in fit.consumes if s in available), None)
            if key is None:
                loose += 1
            else:
                groups.setdefault(key, []).append(position)
        total, limiting = loose, None
        for (pool_id, counter_set), members in groups.items():
            pool = self.devices[members[0]].pool
            limits = self.a.available_counters(pool)[counter_set]
            consumed = self.consumed.get((pool_id, counter_set), {})
            smallest: dict[str, Fraction] | None = None
            for position in members:
                amounts = dict(next(c for s, c in self.devices[position].consumes if s == counter_set))
                if smallest is None:
                    smallest = {k: v for k, v in amounts.items() if v > 0 and k in limits}
                else:
                    smallest = {k: min(v, amounts[k]) for k, v in smallest.items() if amounts.get(k, 0) > 0}
            best = len(members)
            for name, least in (smallest or {}).items():
                fit_count = int((limits[name] - consumed.get(name, 0)) // least)
                if fit_count < best:
                    best, limiting = fit_count, f"counter {name} of {counter_set}"
            total += max(best, 0)
        return total, limiting

    def _groups(self, positions: frozenset[int]) -> tuple[int, list[tuple[tuple[int, str], int, dict[str, Any]]]]:
        """Static facts about a candidate set: devices without counters, and per counter set the number
        of candidates and the smallest amount of each counter every one of them consumes."""
        found = self._group_cache.get(positions)
        if found is not None:
            return found
        loose = 0
        groups: dict[tuple[int, str], list[int]] = {}
        for position in positions:
            if not self.pool_ok[position]:
                continue
            fit = self.devices[position]
            if self._is_multi(position):
                loose += 1 << 30
                continue
            available = self.a.available_counters(fit.pool)
            key = next(((id(fit.pool), s) for s, _ in fit.consumes if s in available), None)
            if key is None:
                loose += 1
            else:
                groups.setdefault(key, []).append(position)
        facts = []
        for (pool_id, counter_set), members in groups.items():
            limits = self.a.available_counters(self.devices[members[0]].pool)[counter_set]
            smallest: dict[str, Any] | None = None
            for position in members:
                amounts = dict(next(c for s, c in self.devices[position].consumes if s == counter_set))
                if smallest is None:
                    smallest = {k: v for k, v in amounts.items() if v > 0 and k in limits}
                else:
                    smallest = {k: min(v, amounts[k]) for k, v in smallest.items() if amounts.get(k, 0) > 0}
            facts.append(((pool_id, counter_set), len(members), {"pool": self.devices[members[0]].pool,
                                                                 "limits": limits, "smallest": smallest or {}}))
        result = (loose, facts)
        self._group_cache[positions] = result
        return result

    def _quick_capacity(self, positions: frozenset[int]) -> tuple[int, Counter[str]]:
        """An upper bound on how many of ``positions`` still fit, from the counters left (cheap)."""
        loose, facts = self._groups(positions)
        total, limiting = loose, Counter[str]()
        for key, count, fact in facts:
            best = count
            if fact["smallest"]:
                limits = fact["limits"]
                consumed = self.consumed.get(key, {})
                for name, least in fact["smallest"].items():
                    fit_count = int((limits[name] - consumed.get(name, 0)) // least)
                    if fit_count < best:
                        best = fit_count
                        limiting[f"{name} of {key[1]}"] += 1
            total += max(best, 0)
        return total, limiting

    def _bound_ok(self, claim: int, request: int, sub: int, device: int) -> bool:
        """Whether the counters left can still hold every device the remaining requests need."""
        key = (claim, request, sub)
        checks = self._suffix_cache.get(key)
        if checks is None:
            demands = self._remaining(claim, request, sub, 0)
            union: set[int] = set()
            per_set: dict[frozenset[int], int] = {}
            for candidates, need in demands:
                union |= candidates
                per_set[candidates] = per_set.get(candidates, 0) + need
            checks = [(frozenset(union), sum(n for _, n in demands)), *per_set.items()] if demands else []
            self._suffix_cache[key] = checks
        for positions, need in checks:
            capacity, limiting = self._quick_capacity(positions)
            if capacity < need - device:
                alt = self.alts[(claim, request)][sub]
                names = ", ".join(name for name, _ in limiting.most_common(3))
                if len(limiting) > 3:
                    names += f" and {len(limiting) - 3} more"
                why = Counter({f"the counters left (counter {names}) hold at most {capacity}" if names else
                               f"only {capacity} candidate devices": 1})
                self._record_failure(claim, alt, why, f"{need - device} more device(s) needed")
                return False
        return True

    def _make_packing(self) -> Packing | None:
        """The exact packing check (``fit/packing.py``), where cutting a branch cannot change the answer.

        Off where a branch the check cuts could end the scheduler's search another way than by
        failing: a CEL runtime error on a candidate, a capacity request (an unrepresentable amount
        aborts), a claim that may pass the 32-device limit (``errAllocationResultMaxSizeExceeded``
        backtracks past the request), an ``All`` request beside constraints (a refused device aborts),
        and a search whose failed branches change the state (:meth:`_failures_leave_traces`).
        """
        if self._traces:
            return None
        for claim_index, claim in enumerate(self.claims):
            most = 0
            for request_index in range(len(claim.requests)):
                alts = self.alts[(claim_index, request_index)]
                if any(alt.errors or alt.spec.capacity or (alt.all_devices is not None and claim.constraints)
                       for alt in alts):
                    return None
                most += max(alt.need for alt in alts)
            if most > ALLOCATION_RESULTS_MAX_SIZE:
                return None
        groups: list[PackingGroup] = []
        limits: dict[Any, dict[str, Fraction]] = {}
        members: dict[tuple[int, str], list[int]] = {}
        for position, fit in enumerate(self.devices):
            if not self.pool_ok[position] or self._is_multi(position):
                continue
            available = self.a.available_counters(fit.pool)
            counter_set = next((s for s, _ in fit.consumes if s in available), None)
            if counter_set is None:
                groups.append(PackingGroup(("device", position), (position,), (), ((),)))
                continue
            key = (id(fit.pool), counter_set)
            limits[key] = available[counter_set]
            members.setdefault(key, []).append(position)
        scales: dict[Any, tuple[int, ...]] = {}
        for key, positions in members.items():
            names = tuple(limits[key])
            exact = [dict(next(c for s, c in self.devices[p].consumes if s == key[1])) for p in positions]
            # integers: each counter in units of the finest amount a device consumes of it (exact,
            # and Fraction arithmetic is what the enumeration would otherwise spend its time on)
            scale = tuple(math.lcm(1, *(Fraction(e.get(name, 0)).denominator for e in exact)) for name in names)
            scales[key] = scale
            amounts = tuple(tuple(int(Fraction(e.get(name, 0)) * k) for name, k in zip(names, scale, strict=True))
                            for e in exact)
            groups.append(PackingGroup(key, tuple(positions), names, amounts))

        def remaining(group: PackingGroup) -> tuple[int, ...]:
            key: tuple[int, str] = group.key  # type: ignore[assignment]  # counter-set groups only
            left, used = limits[key], self.consumed.get(key, {})
            # at least 0: devices already allocated can overdraw a counter (shares committed before
            # 1.36.2 charged none), and the scheduler checks only the counters a device lists, so an
            # overdrawn counter must not bind the devices that consume none of it (amount 0 here)
            return tuple(max(0, math.floor((left[name] - used.get(name, 0)) * k))
                         for name, k in zip(group.names, scales[group.key], strict=True))

        return Packing(groups, remaining, lambda position: not self._in_use(position))

    def _failures_leave_traces(self) -> bool:
        """Whether a branch that fails can change what later branches see: through 1.35 upstream keeps
        the counters of a device refused after its counter check (a taint, a constraint) consumed
        for the rest of the allocation (``allocator_keeps_refused_counters``). Cutting such a branch,
        even one with no solution, skips that consumption, and a later branch may then succeed where
        the scheduler's fails."""
        if not (self.a.upstream_quirks and self.a.target.allocator_keeps_refused_counters):
            return False
        if any(claim.constraints for claim in self.claims):
            return True
        return self.a.gate("DRADeviceTaints") and any(
            fit.consumes and any(t.get("effect") in ("NoSchedule", "NoExecute") for t in fit.taints)
            for fit in self.devices)

    def _packs(self, claim: int, request: int, sub: int, device: int, alt: _Alt) -> bool:
        """Whether the free devices can still hold every exclusive request from here on (``fit/packing.py``)."""
        assert self._packing is not None
        key = (claim, request, sub)
        found = self._demands.get(key)
        if found is None:
            types: list[frozenset[int]] = []
            need: list[int] = []
            current: int | None = None
            for index, (candidates, count) in enumerate(self._remaining(claim, request, sub, 0)):
                if any(self._is_multi(p) for p in candidates):
                    continue  # a shared device serves any number: no bound
                if candidates not in types:
                    types.append(candidates)
                    need.append(0)
                t = types.index(candidates)
                need[t] += count
                if index == 0 and not alt.admin:
                    current = t
            found = self._demands[key] = (tuple(types), need, current)
        types_, base, current_ = found
        demand = list(base)
        if current_ is not None:
            demand[current_] -= device
        if self._packing.fits(types_, tuple(demand)) is not False:
            return True
        self._record_failure(claim, alt, Counter({
            "no packing of the devices still free holds the requests left (counters left per counter set)": 1}),
            f"{sum(demand)} more device(s) needed")
        return False

    # --- explanations ----------------------------------------------------------------------

    def _record_failure(self, claim: int, alt: _Alt, why: Counter[str], summary: str = "") -> None:
        depth = sum(len(r) for r in self.results)
        if depth > self.deepest:
            self.deepest = depth
            self.deepest_reason = (claim, alt.request_name, why, summary)

    def _explain(self) -> str:
        for claim_index, claim in enumerate(self.claims):
            for request_index, request in enumerate(claim.requests):
                alts = self.alts[(claim_index, request_index)]
                problems = [self._alone(claim, alt) for alt in alts]
                if all(p is not None for p in problems):
                    joined = "; ".join(p for p in problems if p)
                    self.failed = (claim.name, request.name)
                    self.no_match = all(not alt.candidates for alt in alts)
                    return f"claim {claim.name}, request {request.name}: {joined}"
        if self.deepest_reason is not None:
            claim_index, name, why, summary = self.deepest_reason
            self.failed = (self.claims[claim_index].name, name.partition("/")[0])
            common = why.most_common(3)
            detail = ", ".join(f"{reason} ({count})" for reason, count in common) or "no device left"
            if len(why) > len(common):
                detail += f" and {len(why) - len(common)} more"
            return (f"the claims do not fit together: with {max(self.deepest, 0)} device(s) allocated, claim "
                    f"{self.claims[claim_index].name}, request {name} gets no device"
                    + (f" ({summary})" if summary else "") + f": {detail}")
        return "no solution"

    def _alone(self, claim: Claim, alt: _Alt) -> str | None:
        """Why ``alt`` cannot be satisfied even alone on this node (``None``: it can)."""
        key = (alt.spec, alt.class_selectors)
        if key not in self._alone_cache:
            self._alone_cache[key] = self._alone_uncached(claim, alt)
        return self._alone_cache[key]

    def _alone_uncached(self, claim: Claim, alt: _Alt) -> str | None:
        usable = [p for p in alt.candidates if self.pool_ok[p]]
        if not alt.candidates:
            pool_devices = [d.device for d in self.devices]
            if not pool_devices:
                return "no devices on this node"
            clause = explain_no_match(list(alt.class_selectors), list(alt.spec.selectors), pool_devices,
                                      self.a.target, max(alt.need, 1), alt.spec.device_class)
            return f"no device of class {alt.spec.device_class} matches: {clause}"
        if alt.all_devices is not None:
            return None
        if usable and not self.a.gate("DRAPartitionableDevices") and all(self.devices[p].consumes for p in usable):
            return (f"all {len(usable)} matching devices consume counters (partitionable devices), but the "
                    "DRAPartitionableDevices feature gate is off")
        free = [p for p in usable if alt.admin or self.devices[p].id not in self.a.allocated.devices]
        tolerated = [p for p in free if not any(
            t.get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(t, alt.spec)
            for t in self.devices[p].taints) or not self.a.gate("DRADeviceTaints")]
        saved = self.consumed
        self.consumed = {}
        try:
            capacity, limiting = self._capacity_of(tolerated) if not alt.admin else (len(tolerated), None)
        finally:
            self.consumed = saved
        if capacity >= alt.need:
            return None
        parts = [f"needs {alt.need} device(s); {len(alt.candidates)} match"]
        if len(usable) < len(alt.candidates):
            parts.append(f"{len(alt.candidates) - len(usable)} in incomplete or invalid pools")
        if len(free) < len(usable):
            parts.append(f"{len(usable) - len(free)} already allocated")
        if len(tolerated) < len(free):
            keys = sorted({str(t.get("key")) for p in free for t in self.devices[p].taints})
            parts.append(f"{len(free) - len(tolerated)} tainted ({', '.join(keys)}) and not tolerated")
        parts.append(f"at most {capacity} can be allocated together" + (f" ({limiting} exhausted)" if limiting else ""))
        return ", ".join(parts)
