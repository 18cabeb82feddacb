"""What the allocator reads and answers: the allocated state, one device's result, one node's outcome.

The constants name the limits the scheduler's search runs under (its claim size and filter
timeout); docs/fit.md explains them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from dra_constructs.fit.capacity import format_quantity

__all__ = ["ALLOCATION_RESULTS_MAX_SIZE", "DEFAULT_STEP_BUDGET", "PACKING_AFTER", "SCHEDULER_FILTER_TIMEOUT_S",
           "SCHEDULER_STEPS_PER_SECOND", "SHARED_UNSHAREABLE", "AllocatedState", "DeviceResult", "NodeResult"]

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
    #: ``allocateOne`` calls of the scheduler's search to this solution (``fit/scheduler_time.py``;
    #: ``None``: not counted); with ``scheduler_steps_over`` a lower bound (it takes more).
    scheduler_steps: int | None = None
    scheduler_steps_over: bool = False
    #: Where the scheduler's search order does not reach this solution (not expected).
    scheduler_note: str | None = None
    #: That the scheduler may time out before reaching this solution, and why.
    warning: str | None = None
