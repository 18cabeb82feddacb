"""Allocator-grade fit check: can these claims (the claims of one Pod) be allocated, and where?

Pure Python core (no cdk8s). :func:`fit` runs :class:`Allocator` - a port of the scheduler's
structured allocator - on every node of an :class:`Inventory` and returns one example allocation
per node that can take the claims, or the reason per node that cannot. docs/fit.md has the details.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_constructs.fit.allocator import (
    ALLOCATION_RESULTS_MAX_SIZE,
    DEFAULT_STEP_BUDGET,
    AllocatedState,
    Allocator,
    DeviceResult,
    NodeResult,
)
from dra_constructs.fit.fleet import FleetCache, FleetKeys, NodeNames, carry
from dra_constructs.fit.inputs import FitInputs, collect, default_device_classes, feature_gates
from dra_constructs.fit.model import (
    Claim,
    Constraint,
    DeviceClass,
    Inventory,
    Node,
    Request,
    SubRequest,
    Toleration,
    claim_from_spec,
)
from dra_constructs.fit.validate import validate_allocation
from dra_constructs.target import Target

__all__ = [
    "ALLOCATION_RESULTS_MAX_SIZE",
    "AllocatedState",
    "Allocator",
    "Claim",
    "Constraint",
    "DeviceClass",
    "DeviceResult",
    "FitInputs",
    "FitReport",
    "FleetCache",
    "Inventory",
    "Node",
    "NodeResult",
    "Request",
    "SubRequest",
    "Toleration",
    "claim_from_spec",
    "collect",
    "default_device_classes",
    "feature_gates",
    "fit",
    "validate_allocation",
]

#: Most Pods ``count`` places on one node before it stops counting.
MAX_COUNT = 1000


@dataclass
class FitReport:
    """Per node: allocatable or not, the example allocation, the reason; ``counts`` with ``count``."""

    nodes: dict[str, NodeResult] = field(default_factory=dict)
    counts: dict[str, int] | None = None

    @property
    def allocatable(self) -> bool:
        return any(result.allocatable for result in self.nodes.values())

    def as_json(self) -> dict[str, Any]:
        nodes: dict[str, Any] = {}
        for name, result in self.nodes.items():
            entry: dict[str, Any] = {"allocatable": result.allocatable,
                                     "devices": [d.as_json() for d in result.devices],
                                     "reason": result.reason}
            if result.scheduler_steps is not None:  # the scheduler's own steps to this solution (docs/fit.md)
                entry["schedulerSteps"] = result.scheduler_steps
                if result.scheduler_steps_over:
                    entry["schedulerStepsMoreThan"] = True
            if result.warning:
                entry["warning"] = result.warning
            if self.counts is not None:
                entry["count"] = self.counts.get(name, 0)
            nodes[name] = entry
        return {"allocatable": self.allocatable, "nodes": nodes}


def fit(
    claims: Sequence[Claim],
    inventory: Inventory,
    *,
    target: Target,
    classes: Mapping[str, DeviceClass] | None = None,
    gates: Mapping[str, bool] | None = None,
    allocated: AllocatedState | None = None,
    nodes: Sequence[str] | None = None,
    count: bool = False,
    stop_at_first: bool = False,
    progress: Callable[[int, int], None] | None = None,
    dedupe: bool = True,
    fleet: FleetCache | None = None,
    step_budget: int = DEFAULT_STEP_BUDGET,
) -> FitReport:
    """Allocate ``claims`` together on each node (or those in ``nodes``).

    ``count``: also how many such Pods fit on each node at once, placing them one after the
    other as the scheduler would (each Pod's first solution stays allocated). ``stop_at_first``:
    stop at the first node that can take them (the construct-time check). ``progress``: called
    with (nodes done, nodes in all) as the nodes are solved (the command line's indicator).
    ``dedupe``: solve each kind of node once and carry the answer to the nodes equivalent to it
    (``fit/fleet.py``; the answers are the per-node ones, ``False`` solves every node); ``fleet``:
    node keys shared with other calls on the same inventory (a command's Pods). ``step_budget``: search
    steps per node before "gave up" (default: the scheduler's 10 s filter timeout, docs/fit.md).
    """
    allocator = Allocator(inventory, classes if classes is not None else default_device_classes(),
                          gates if gates is not None else target.default_feature_gates, target, allocated,
                          step_budget=step_budget)
    report = FitReport(counts={} if count else None)
    wanted = set(nodes) if nodes is not None else None
    keys = None if not dedupe else fleet.keys(allocator, claims) if fleet is not None else FleetKeys(allocator, claims)
    solved_kinds: dict[Any, tuple[NodeNames, NodeResult, int]] = {}
    for done, node in enumerate(inventory.nodes):
        if wanted is not None and node.name not in wanted:
            continue
        if progress is not None:
            progress(done, len(inventory.nodes))
        result, placed = None, 0
        keyed = keys.key(node) if keys is not None else None
        solved = solved_kinds.get(keyed[0]) if keyed is not None else None
        if keyed is not None and solved is not None:
            result, placed = carry(solved[1], solved[0], keyed[1]), solved[2]
        if result is None:
            result = allocator.allocate(claims, node)
            placed = _count(allocator, claims, node, result) if count else 0
            if keyed is not None and solved is None:
                solved_kinds[keyed[0]] = (keyed[1], result, placed)
        report.nodes[node.name] = result
        if count and report.counts is not None:
            report.counts[node.name] = placed
        if stop_at_first and result.allocatable:
            break
    return report


def _count(allocator: Allocator, claims: Sequence[Claim], node: Node, first: NodeResult) -> int:
    if not first.allocatable:
        return 0
    base = allocator.allocated
    state = base.copy()
    placed, result = 0, first
    try:
        while result.allocatable and placed < MAX_COUNT:
            placed += 1
            for device in result.devices:
                if device.admin_access:
                    continue
                if device.share:  # as the scheduler records the Pod's share (shareID, consumedCapacity)
                    state.shares.setdefault(device.id, set()).add(f"fit-{placed}-{device.claim}-{device.request}")
                    if device.consumed:
                        used = state.capacity.setdefault(device.id, {})
                        for name, amount in device.consumed:
                            used[name] = used.get(name, 0) + amount
                else:
                    state.devices.add(device.id)
            allocator.allocated = state
            allocator._available.clear()
            result = allocator.allocate(claims, node)
    finally:
        allocator.allocated = base
        allocator._available.clear()
    return placed
