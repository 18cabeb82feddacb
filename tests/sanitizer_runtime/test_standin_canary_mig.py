"""The residue canary's DynamicMIG variant (agent/canary_mig.py) through the real NVML backend and the
CUDA worker on the stand-in driver: GI destroy and recreate over the same memory slices, both ways.

The stand-in's ``nvmlGpuInstanceDestroy`` keeps the GI slot's memory (``gi_destroy_scrub`` off: the
next GI at the placement reads what the last one's tenant left) or zeroes it (on); nvml.h does not
say which the real driver does (standin/nvml.c cites the lines). Scrub-on-free at the worker's exit
is the other way residue can go: only with both off does the pattern survive.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_constructs.agent import canary
from dra_constructs.agent.kube import Tenant as ClaimTenant
from dra_constructs.agent.runtime import Runtime, build_runtime
from dra_constructs.agent.state import Phase
from dra_constructs.errors import DraConstructsError

from .standin import Node
from .test_standin_backends import MakeNode, a100_mig, agent_config, standin  # noqa: F401 - fixture
from .test_standin_dynamic_mig import ONE_G, _gi, _gis_present, _placements

TENANT = ClaimTenant("team-a/c1", "team-a", "u1")


def _sanitized(standin: MakeNode, tmp_path: Path, **node: bool) -> tuple[Node, Runtime]:  # noqa: F811
    made = standin([a100_mig("GPU-d", 0, _placements())], **node)
    rt = build_runtime(agent_config(tmp_path, dynamic_mig=True), fsync=False)
    device = rt.barrier.deps.inventory[ONE_G]
    rt.barrier.mark_allocated(device, TENANT)  # a tenant used it; its barrier released it clean
    assert rt.barrier.run(device, "deallocated", TENANT).result == "released"
    assert _gis_present(made) == []
    return made, rt


@pytest.mark.parametrize(("scrub_on_free", "gi_destroy_scrub", "verdict"), [
    (False, False, "residue"), (False, True, "clean"), (True, False, "clean")])
def test_gi_destroy_and_recreate_both_ways(standin: MakeNode, tmp_path: Path,  # noqa: F811
                                           scrub_on_free: bool, gi_destroy_scrub: bool, verdict: str) -> None:
    node, rt = _sanitized(standin, tmp_path, scrub_on_free=scrub_on_free, gi_destroy_scrub=gi_destroy_scrub)
    deps = rt.barrier.deps
    device = deps.inventory[ONE_G]
    record = canary.run_selftest(deps, device, "selftest", sanitized=True)
    assert record.result == verdict, record.reason
    figures = record.selftest
    assert figures is not None and figures.model.endswith("[MIG GI recreate]")
    assert figures.bytes_written > 0 and figures.bytes_read * 2 >= figures.bytes_written
    assert (figures.residue_words > 0) is (verdict == "residue") and figures.other_nonzero_words == 0
    assert record.transient_instance is not None and "destroyed; read in a fresh one" in " ".join(record.warnings)
    assert record.coverage_of_free is not None and record.coverage_of_free >= 0.99  # the cleanup's proof
    assert _gis_present(node) == []  # the placement is left as found: no instance
    state = deps.store.load(device.name)
    assert state.phase is Phase.CLEAN and state.transient_uuid is None and not state.transient_pending
    assert not any(node.memory(0, 0)), "the fresh GI's worker zeroed what it read"
    assert deps.scrub_on_free_disabled is (True if verdict == "residue" else deps.scrub_on_free_disabled)


def test_dynamic_placements_only_on_demand_and_only_free(standin: MakeNode, tmp_path: Path) -> None:  # noqa: F811
    node, rt = _sanitized(standin, tmp_path)
    deps = rt.barrier.deps
    device = deps.inventory[ONE_G]
    with pytest.raises(DraConstructsError, match="on demand only"):
        canary.run_selftest(deps, device, "agent-start")
    assert canary.at_start(rt.barrier, list(deps.inventory.values()), lambda _name: False) == []
    _gi(14, 0, 2)  # the DRA driver prepared the overlapping 2g placement
    with pytest.raises(DraConstructsError, match="overlapping placement gpu-0-mig-2g20gb-14-0"):
        canary.run_selftest(deps, device, "selftest", sanitized=True)
    assert _gis_present(node) == [2] and deps.store.load(device.name).phase is Phase.CLEAN
