"""The state of one ``Allocate`` call on one node and what one device does to it.

``_SearchState`` holds what the search changes (devices taken, counters and capacity consumed,
results, constraint states) and the steps that change it for one device (``allocateDevice`` and
its undo); the bounds (``fit/bounds.py``), the explanations (``fit/explain.py``) and the search
itself (``fit/search.py``) build on it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from dra_constructs.fit.capacity import (
    NotRepresentable,
    consumed_amount,
    device_capacities,
    resolve_requests,
    violates_policy,
)
from dra_constructs.fit.constraints import _ConstraintState, _tolerated
from dra_constructs.fit.model import Claim, FitDevice, Node, Pool, SubRequest
from dra_constructs.fit.packing import Packing
from dra_constructs.fit.results import DeviceResult

if TYPE_CHECKING:
    from dra_constructs.fit.allocator import Allocator


class _Stop(Exception):
    """Allocation cannot continue on this node (``errStop`` / an allocation error)."""


class _OverLimit(Exception):
    """``errAllocationResultMaxSizeExceeded``."""


class _Uncounted(Exception):
    """The plain search passed what it may count (``fit/scheduler_time.py``)."""


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


#: :meth:`_SearchState._consumption_of`: amounts (None: skipped), capacities, an amount over its capacity,
#: and the request (kept so that the ``id`` the cache is keyed by stays its own).
_Consumed = tuple[dict[str, Fraction] | None, dict[str, Fraction], bool, SubRequest]
#: :meth:`_SearchState._counter_plan`.
_CounterPlan = tuple[tuple[tuple[int, str], str, tuple[tuple[str, Fraction, Fraction], ...]], ...]


class _SearchState:
    """The state of one ``Allocate`` call on one node."""

    #: The claim and request a failed search's reason is about (set by the explanation).
    failed: tuple[str, str] | None
    #: Whether no device of the node matches the failed request at all.
    no_match: bool

    def __init__(self, allocator: Allocator, claims: Sequence[Claim], node: Node, plain: bool = False) -> None:
        self.a = allocator
        #: The scheduler's search without fit's cuts (symmetry, bounds, packing, failed states), to
        #: count its steps (``fit/scheduler_time.py``); a failed state's steps are counted again.
        self.plain = plain
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
        #: Branches cut before the solution (``0``: the scheduler's search took the same steps).
        self.cuts = 0
        #: Steps after which the search stops: the budget, or for the plain count the most steps it
        #: counts (``count_cap``; a lower work limit would rise by the steps counted, not taken).
        self.count_cap = allocator.scheduler_count_work
        self.limit = self.count_cap if plain else allocator.step_budget
        self._failed_steps: dict[Any, int] = {}
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
        self._consumed_cache: dict[tuple[int, int], _Consumed] = {}
        self._counter_plans: dict[int, _CounterPlan] = {}
        #: Per position: allocated before this call (``AllocatedState.devices``), read once.
        self._allocated_before: list[bool] = []
        #: :meth:`_Bounds._quick_capacity` per candidate-set fact and counters consumed.
        self._fact_bounds: dict[tuple[int, tuple[tuple[str, Fraction], ...]], tuple[int, tuple[str, ...]]] = {}

    # --- one device ------------------------------------------------------------------------

    def _in_use(self, position: int) -> bool:
        if self.allocating.get(position):
            return True
        before = self._allocated_before
        if len(before) != len(self.devices):  # (the allocated state does not change during a search)
            before = self._allocated_before = [d.id in self.a.allocated.devices for d in self.devices]
        return before[position]

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
        The returned amounts are shared between calls: read them, do not change them.
        """
        found = self._consumed_cache.get((position, id(spec)))
        if found is None:
            found = self._consumed_cache[(position, id(spec))] = self._consumption_of(position, spec)
        amounts, capacity, over, _ = found
        if amounts is None:
            return None
        device = self.devices[position]
        used = self.a.allocated.capacity.get(device.id)
        pending = self.capacity_in_use.get(position)
        if not used and not pending:
            return None if over else amounts
        used, pending = used or {}, pending or {}
        for name, amount in amounts.items():
            if used.get(name, 0) + pending.get(name, 0) + amount > capacity[name]:
                return None
        return amounts

    def _consumption_of(self, position: int, spec: SubRequest) -> _Consumed:
        """What :meth:`_consumption` reads that depends on the device and the request alone (the
        search changes neither), computed once per pair: the amounts (``None``: the device lacks a
        capacity asked for, or its policy refuses an amount), the device's capacities, whether an
        amount alone overruns its capacity; an unrepresentable request raises here every time."""
        device = self.devices[position]
        capacity = device_capacities(device.capacity, device.device.driver)
        consumed: dict[str, Fraction] = {}
        try:
            wanted = resolve_requests(spec.capacity, device.capacity, device.device.driver)
            if wanted is None:  # asks for a capacity the device lacks
                return None, capacity, False, spec
            for name, total in capacity.items():
                consumed[name] = consumed_amount(wanted.get(name), total, device.request_policies.get(name))
        except NotRepresentable as error:
            raise _Stop(f"request {spec.name} on device {device.id}: {error}") from None
        for name in capacity:
            if violates_policy(consumed[name], device.request_policies.get(name)):
                return None, capacity, False, spec
        return consumed, capacity, any(consumed[name] > total for name, total in capacity.items()), spec

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
        plan = self._counter_plans.get(position)
        if plan is None:
            plan = self._counter_plans[position] = self._counter_plan(position)
        over: str | None = None
        for key, counter_set, counters in plan:
            consumed = self.consumed.get(key)
            if consumed is None:
                consumed = self.consumed[key] = {}
            for name, value, limit in counters:
                now = consumed.get(name, 0) + value
                consumed[name] = now
                if now > limit and over is None:
                    over = f"counter {name} of {counter_set} exhausted"
        if over is not None:
            for key, _, counters in plan:
                consumed = self.consumed[key]
                for name, value, _ in counters:
                    consumed[name] -= value
        return over

    def _counter_plan(self, position: int) -> _CounterPlan:
        """The counters :meth:`_take_counters` charges for a device: per counter set of its pool that it
        consumes from, (``consumed`` key, set name, (counter, amount, limit) of the counters the set has).
        The pool's available counters do not change during a search (``Allocator.available_counters``)."""
        fit = self.devices[position]
        available = self.a.available_counters(fit.pool)
        plan: list[tuple[tuple[int, str], str, tuple[tuple[str, Fraction, Fraction], ...]]] = []
        for counter_set, counters in fit.consumes:
            limits = available.get(counter_set)
            if limits is None:
                continue
            plan.append(((id(fit.pool), counter_set), counter_set,
                         tuple((name, value, limits[name]) for name, value in counters if name in limits)))
        return tuple(plan)

    def _give_counters(self, position: int) -> None:
        plan = self._counter_plans.get(position)
        if plan is None:
            plan = self._counter_plans[position] = self._counter_plan(position)
        for key, _, counters in plan:
            consumed = self.consumed[key]
            for name, value, _ in counters:
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

    # --- explanations ----------------------------------------------------------------------

    def _record_failure(self, claim: int, alt: _Alt, why: Counter[str], summary: str = "") -> None:
        depth = sum(len(r) for r in self.results)
        if depth > self.deepest:
            self.deepest = depth
            self.deepest_reason = (claim, alt.request_name, why, summary)
