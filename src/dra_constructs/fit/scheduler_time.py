"""How long the scheduler's own search takes to the solution ``fit`` found, and when it may time out.

``fit`` searches in the scheduler's order but cuts branches that hold no solution (symmetry of
identical claims, the counter bound, the packing check, states that already failed), so it may
find in a thousand steps what the scheduler's plain search (``allocateOne``, counted upstream as
``numAllocateOneInvocations``) reaches only after a hundred thousand - past its filter timeout
on a slow or loaded scheduler. When nothing was cut before the solution the two counts are the
same; otherwise the plain search is run again, without cuts, up to ``SCHEDULER_COUNT_WORK``
steps of work: a state at a claim boundary that already failed is not searched again, the steps
it took are counted again (the search from there depends on that state alone), which is exact
and often far cheaper. A count past the work limit, or past ``SCHEDULER_COUNT_WORK`` steps
counted, is a lower bound ("more than"). docs/fit.md has the numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dra_constructs.fit.results import (
    DEFAULT_STEP_BUDGET,
    SCHEDULER_FILTER_TIMEOUT_S,
    SCHEDULER_STEPS_PER_SECOND,
    NodeResult,
)
from dra_constructs.target import Target

if TYPE_CHECKING:
    from dra_constructs.fit.search import _NodeSearch

__all__ = ["SCHEDULER_COUNT_WORK", "SCHEDULER_WARN_STEPS", "count_scheduler_steps", "filter_timeout", "gave_up",
           "timeout_warning"]

#: Steps of the scheduler's search above which ``fit`` warns that the scheduler may time out:
#: 1 s at the nominal ~50,000 steps a second, a tenth of its filter timeout. The rate depends on
#: the scheduler's machine and load: the 1.34.4 scheduler timed out on ~81,000 steps on a loaded
#: 2-core VM (oracle case ``p00``), so the margin is wide on purpose.
SCHEDULER_WARN_STEPS = SCHEDULER_STEPS_PER_SECOND
#: Most steps the plain search may take (steps counted again from failed states excepted) to
#: count the scheduler's steps, and most steps it counts; past either the count is a lower bound
#: ("more than"). Above the warning threshold, so a count cut short still warns; well below the
#: nominal timeout, as counting costs ``fit`` ~0.04 ms a step (counting to 500,000 took up to 12 s
#: of CPU on the 8-GPU packings of ``benchmarks/fit_bench.py``, docs/performance.md).
SCHEDULER_COUNT_WORK = 2 * SCHEDULER_WARN_STEPS


def filter_timeout(target: Target) -> int | None:
    """The scheduler's default filter timeout in seconds on ``target`` (``None``: it has none).

    ``filterTimeout`` of the DynamicResources plugin's args (``DynamicResourcesFilterTimeoutDefault``
    = 10 s, ``k8s.io/kube-scheduler/config/v1/types.go`` v0.34.4 and v0.37.2), applied when the
    scheduler's ``DRASchedulerFilterTimeout`` gate is on: beta and on by default from 1.34, absent
    before (``pkg/features/kube_features.go``); then the search runs until it ends.
    """
    return SCHEDULER_FILTER_TIMEOUT_S if target.minor >= 34 else None


def gave_up(budget: int, target: Target) -> str:
    """Why ``fit`` stopped at ``budget`` steps: the scheduler's timeout where the budget is its own."""
    timeout = filter_timeout(target)
    if budget < DEFAULT_STEP_BUDGET:
        return (f"gave up after {budget:,} search steps (the step budget; the scheduler's search takes at least as "
                f"many, its limit is about {DEFAULT_STEP_BUDGET:,}): raise the budget for an answer")
    if timeout is None:
        return (f"gave up after {budget:,} search steps: the scheduler's search takes at least as many "
                f"(~{budget // SCHEDULER_STEPS_PER_SECOND:,} s or more at ~{SCHEDULER_STEPS_PER_SECOND:,} steps a "
                f"second; before 1.34 it has no filter timeout and spends that long on this node in every "
                "scheduling attempt): simplify the claims or split the Pod")
    return (f"gave up after {budget:,} search steps: the scheduler's search takes at least as many and would pass "
            f"its filter timeout ({timeout} s, filterTimeout of the DynamicResources plugin, gate "
            f"DRASchedulerFilterTimeout; ~{SCHEDULER_STEPS_PER_SECOND:,} steps a second), leaving the node "
            "unschedulable: simplify the claims or split the Pod")


def count_scheduler_steps(result: NodeResult, plain: _NodeSearch) -> None:
    """Set ``result.scheduler_steps`` from ``plain`` (the same Pod and node, ``plain=True``)."""
    from dra_constructs.fit.search_state import _OverLimit, _Stop, _Uncounted

    try:
        plain._prepare()
        found = plain._one(0, 0, 0, 0, False, 0)
    except _Uncounted:
        result.scheduler_steps, result.scheduler_steps_over = plain.steps, True
        return
    except (_Stop, _OverLimit) as error:  # not expected: fit's cuts hold no solution and no error
        result.scheduler_note = f"the scheduler's search order ends before this solution: {error or 'no solution'}"
        return
    devices = [r for claim in plain.results for r in claim]
    if not found or devices != result.devices:  # not expected either: the first solution is the same
        result.scheduler_note = "the scheduler's search order finds another first solution"
        return
    result.scheduler_steps = plain.steps


def timeout_warning(result: NodeResult, target: Target) -> str | None:
    """The warning that the scheduler may time out before reaching ``result`` (``None``: no reason to)."""
    if result.scheduler_note:
        return result.scheduler_note
    steps = result.scheduler_steps
    if steps is None or steps <= SCHEDULER_WARN_STEPS:
        return None
    how_many = f"more than {steps:,}" if result.scheduler_steps_over else f"{steps:,}"
    seconds = steps / SCHEDULER_STEPS_PER_SECOND
    about = f"~{seconds:.1f} s" + (" or more" if result.scheduler_steps_over else "")
    timeout = filter_timeout(target)
    cut = f"fit's cuts found it in {result.steps:,}"
    if timeout is None:
        return (f"the scheduler's own search takes {how_many} steps to this solution ({about} at "
                f"~{SCHEDULER_STEPS_PER_SECOND:,} steps a second; {cut}); before 1.34 it has no filter timeout and "
                "spends that long on this node in every scheduling attempt")
    return (f"the scheduler may time out on this node: its own search takes {how_many} steps to this solution "
            f"({about} at the nominal ~{SCHEDULER_STEPS_PER_SECOND:,} steps a second, an estimate: the rate depends "
            f"on the scheduler's machine and load; {cut}); its filter timeout is {timeout} s (filterTimeout of the "
            "DynamicResources plugin, gate DRASchedulerFilterTimeout) and leaves the node unschedulable when it passes")
