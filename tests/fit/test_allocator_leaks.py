"""Through 1.35 a failed branch changes the state: no shortcut may skip one there."""

from __future__ import annotations

import pytest

from dra_constructs.fit.allocator import Allocator
from dra_constructs.target import Target

from .helpers import ANY, refused_counter_leak


@pytest.mark.parametrize("version", ["1.35", "1.36.2", "1.36", "1.36.3"])
def test_the_counter_bound_does_not_skip_a_branch_that_keeps_refused_counters(version: str) -> None:
    """Subrequest x asks for 3 of model a, and only d0 and d1 are: the counter bound (``_bound_ok``)
    cuts it at once. The scheduler walks it: d0 (parent p0), then d1 takes its 3 slots and is
    refused by matchAttribute (parent p1); through 1.35 the slots stay taken, and y (d2 + d3,
    3 of 4 slots) no longer fits."""
    inventory, claims = refused_counter_leak(3)
    target = Target.parse(version)
    gates = {**target.default_feature_gates, "DRAPartitionableDevices": True, "DRAPrioritizedList": True}
    result = Allocator(inventory, ANY, gates, target, packing_after=None).allocate(claims, inventory.nodes[0])
    # through 1.35 and in 1.36.0-1.36.2 the slots stay taken; 1.36.3 rolls them back (rollbackDevice)
    assert result.allocatable == (version in ("1.36", "1.36.3")), result.reason
