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

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from dra_constructs.cel.matching import CelRuntimeError, selector_matcher
from dra_constructs.fit.model import Claim, DeviceClass, FitDevice, Inventory, Node, Pool
from dra_constructs.fit.pools import PoolIndex
from dra_constructs.fit.results import (
    ALLOCATION_RESULTS_MAX_SIZE,
    DEFAULT_STEP_BUDGET,
    PACKING_AFTER,
    SCHEDULER_FILTER_TIMEOUT_S,
    SCHEDULER_STEPS_PER_SECOND,
    SHARED_UNSHAREABLE,
    AllocatedState,
    DeviceResult,
    NodeResult,
)
from dra_constructs.fit.scheduler_time import SCHEDULER_COUNT_WORK
from dra_constructs.fit.search import _NodeSearch
from dra_constructs.target import Target

__all__ = ["ALLOCATION_RESULTS_MAX_SIZE", "DEFAULT_STEP_BUDGET", "PACKING_AFTER", "SCHEDULER_FILTER_TIMEOUT_S",
           "SCHEDULER_STEPS_PER_SECOND", "SHARED_UNSHAREABLE", "AllocatedState", "Allocator", "DeviceResult",
           "NodeResult"]


class Allocator:
    """Allocate the claims of one Pod against an inventory, node by node."""

    def __init__(self, inventory: Inventory, classes: Mapping[str, DeviceClass], gates: Mapping[str, bool],
                 target: Target, allocated: AllocatedState | None = None,
                 step_budget: int = DEFAULT_STEP_BUDGET, upstream_quirks: bool = True,
                 packing_after: int | None = PACKING_AFTER,
                 scheduler_count_work: int = SCHEDULER_COUNT_WORK) -> None:
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
        #: Steps the plain search may take to count the scheduler's steps to a solution found
        #: with cuts (``fit/scheduler_time.py``; ``0``: not counted).
        self.scheduler_count_work = scheduler_count_work
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
