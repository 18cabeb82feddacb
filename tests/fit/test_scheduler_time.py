"""The scheduler's own steps to fit's solution, and the warning that it may time out (issue 24 item 4).

``fit`` cuts branches without a solution; the scheduler's search (``allocateOne``) does not. The
count is checked against the plain search run step by step (no failed state counted again), and
the warning on the shape of oracle case ``p00`` (4 x A100 80GB filled exactly, largest first),
where the 1.34.4 scheduler timed out while ``fit`` answers in a few hundred steps.
"""

from __future__ import annotations

from typing import Any

import pytest

from dra_constructs.catalog import GPU_SPECS
from dra_constructs.fit import Claim, default_device_classes
from dra_constructs.fit.allocator import DEFAULT_STEP_BUDGET, Allocator
from dra_constructs.fit.scheduler_time import SCHEDULER_COUNT_WORK, filter_timeout, gave_up
from dra_constructs.fit.search import _NodeSearch
from dra_constructs.target import Target

from .helpers import dynamic, mig

FILLS = {"a": ["3g", "2g", "1g", "1g"], "b": ["4g", "3g"], "c": ["2g", "2g", "2g", "1g"]}


def _claims(fills: str, largest: bool) -> list[Claim]:
    names = [p.name for p in next(s for s in GPU_SPECS if s.key == "A100_80GB").mig_profiles]
    short = {"1g": names[0], "2g": names[3], "3g": names[4], "4g": names[5]}
    wanted = [p for fill in fills for p in FILLS[fill]]
    if largest:
        wanted.sort(key=lambda p: -int(p[0]))
    return [mig(f"c{i}", short[p]) for i, p in enumerate(wanted)]


def _allocator(gpus: int, version: str = "1.37", **options: Any) -> tuple[Allocator, Any]:
    target = Target.parse(version)
    inventory = dynamic(gpus=gpus, version=version)
    gates = {**target.default_feature_gates, "DRAPartitionableDevices": True}
    return Allocator(inventory, default_device_classes(), gates, target, **options), inventory.nodes[0]


def _step_by_step(allocator: Allocator, claims: list[Claim], node: Any) -> int:
    """The plain search's steps, every failed state searched again (the scheduler's search)."""
    search = _NodeSearch(allocator, claims, node, plain=True)
    search.count_cap = search.limit = 10**7
    search._next_claim_counted = lambda claim, key: search._one(claim, 0, 0, 0, False, 0)  # type: ignore[method-assign]
    search._prepare()
    assert search._one(0, 0, 0, 0, False, 0)
    return search.steps


@pytest.mark.parametrize(("gpus", "fills", "largest"), [(2, "ac", False), (2, "aa", False), (2, "ab", True),
                                                       (3, "bbb", True)])
def test_scheduler_steps_are_the_plain_searchs(gpus: int, fills: str, largest: bool) -> None:
    allocator, node = _allocator(gpus)
    claims = _claims(fills, largest)
    result = allocator.allocate(claims, node)
    assert result.allocatable and not result.scheduler_steps_over and result.scheduler_note is None
    assert result.scheduler_steps == _step_by_step(allocator, claims, node)
    assert result.warning is None  # a few thousand steps at most


def test_cuts_hide_steps_the_count_restores() -> None:
    allocator, node = _allocator(2)
    result = allocator.allocate(_claims("ac", False), node)
    # symmetry of identical claims and the bounds cut most of the scheduler's search
    assert result.scheduler_steps is not None and result.scheduler_steps > 10 * result.steps


def test_p00_shape_warns_that_the_scheduler_may_time_out() -> None:
    allocator, node = _allocator(4)
    result = allocator.allocate(_claims("aaaa", True), node)
    assert result.allocatable and result.steps < 2_000
    assert result.scheduler_steps_over and result.scheduler_steps is not None
    assert result.scheduler_steps > SCHEDULER_COUNT_WORK  # counting stopped there
    assert result.warning is not None
    assert "may time out" in result.warning and "filter timeout is 10 s" in result.warning
    assert "DRASchedulerFilterTimeout" in result.warning and f"found it in {result.steps:,}" in result.warning


def test_before_134_there_is_no_filter_timeout_to_warn_of() -> None:
    assert filter_timeout(Target.parse("1.33")) is None and filter_timeout(Target.parse("1.34")) == 10
    allocator, node = _allocator(4, version="1.33")
    result = allocator.allocate(_claims("aaaa", True), node)
    assert result.allocatable and result.warning is not None
    assert "no filter timeout" in result.warning and "may time out" not in result.warning


def test_a_count_cut_short_is_a_lower_bound() -> None:
    allocator, node = _allocator(2, scheduler_count_work=100)
    result = allocator.allocate(_claims("ac", False), node)
    assert result.allocatable and result.scheduler_steps_over
    assert result.scheduler_steps is not None and 100 < result.scheduler_steps < 2896
    assert result.warning is None  # below the threshold: more than 100 says nothing of a timeout


def test_counting_off_or_needless() -> None:
    allocator, node = _allocator(2, scheduler_count_work=0)
    assert allocator.allocate(_claims("ac", False), node).scheduler_steps is None
    allocator, node = _allocator(1)
    result = allocator.allocate(_claims("a", False)[:1], node)  # nothing cut: fit's steps are the scheduler's
    assert result.scheduler_steps == result.steps


def test_gave_up_names_the_timeout_or_the_budget() -> None:
    allocator, node = _allocator(2, step_budget=50)
    claims = _claims("ac", False) + _claims("a", False)[2:3]  # one 1g too many: no solution
    result = allocator.allocate(claims, node)
    assert not result.allocatable and result.reason is not None
    assert result.reason.startswith("gave up after 50 search steps (the step budget")


def test_gave_up_at_the_default_budget_names_the_timeout_of_the_target() -> None:
    reason = gave_up(DEFAULT_STEP_BUDGET, Target.parse("1.37"))
    assert "would pass its filter timeout (10 s, filterTimeout of the DynamicResources plugin" in reason
    assert "DRASchedulerFilterTimeout" in reason
    before = gave_up(DEFAULT_STEP_BUDGET, Target.parse("1.33"))
    assert "no filter timeout" in before and "would pass" not in before


def test_report_carries_the_count_and_the_warning() -> None:
    from dra_constructs.fit import fit
    from dra_constructs.fit.cli import _text

    target = Target.parse("1.37")
    inventory = dynamic(gpus=4, version="1.37")
    report = fit(_claims("aaaa", True), inventory, target=target)
    (entry,) = report.as_json()["nodes"].values()
    assert entry["allocatable"] and entry["schedulerSteps"] > SCHEDULER_COUNT_WORK
    assert entry["schedulerStepsMoreThan"] is True and "may time out" in entry["warning"]
    assert "\n  warning: the scheduler may time out on this node" in _text(report)
    small = fit(_claims("a", False)[:1], inventory, target=target).as_json()
    (entry,) = small["nodes"].values()
    assert entry["schedulerSteps"] >= 1 and "warning" not in entry and "schedulerStepsMoreThan" not in entry
