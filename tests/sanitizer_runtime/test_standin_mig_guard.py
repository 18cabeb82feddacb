"""MIG where NVML cannot set compute mode (every driver before the CUDA 13.3 NVML, review r04 / D2).

The stand-in answers as the driver generation's nvml.h says (standin/nvml.c, nvmlDeviceSetComputeMode):
R535-R580 refuse every mode but DEFAULT on MIG (or DEFAULT too, ``mig_default_refused``). The
release must still finish, and a quarantined slice must take no new context: its compute
instances are destroyed (the compute-instance guard) and recreated before the next fill.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_constructs.agent.kube import Tenant as ClaimTenant
from dra_constructs.agent.runtime import build_runtime
from dra_constructs.agent.state import Phase

from .standin import CI, GI, MiB, Node, Tenant
from .test_standin_backends import MakeNode, a100_mig, agent_config, standin  # noqa: F401 - fixture

OWNER = ClaimTenant("team-a/c1", "team-a", "u1")
SLICE = "gpu-0-mig-1g10gb-19-0"


def _node(standin: MakeNode, generation: str = "570", **fields: object) -> Node:  # noqa: F811
    gi = GI(1, [CI("MIG-q0")], placement_start=0, total=64 * MiB, **fields)  # type: ignore[arg-type]
    return standin([a100_mig("GPU-m", 0, [gi])], generation=generation, residue_byte=0x5A)


@pytest.mark.parametrize("refused", [False, True])
def test_a_mig_release_finishes_although_nvml_refuses_compute_mode(standin: MakeNode, tmp_path: Path,  # noqa: F811
                                                                   refused: bool) -> None:
    """R570, DEFAULT accepted as a no-op or refused as well: released, not 'interrupted' in releasing."""
    preload = _node(standin)
    if refused:
        preload.mig_default_refused = True
        preload.write()
    rt = build_runtime(agent_config(tmp_path), fsync=False)
    device = rt.device(SLICE)
    record = rt.barrier.run(device, "deallocated")
    assert record.result == "released", record.reason
    assert rt.barrier.deps.store.load(SLICE).phase is Phase.CLEAN
    assert record.compute_mode_guard is False and any("NVML before CUDA 13.3" in w for w in record.warnings)
    assert preload.memory(0, 0).count(0x5A) < 8 * MiB  # the fill ran (what is left: reserved + our context)


def test_a_quarantined_mig_slice_takes_no_new_context_and_is_recreated_at_release(
        standin: MakeNode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """R570: quarantine destroys the compute instance; the operator release recreates it (new UUID) and fills."""
    node = _node(standin, error=999, error_call="nvmlDeviceGetMemoryInfo_v2")  # the memory check fails
    rt = build_runtime(agent_config(tmp_path), fsync=False)
    device = rt.device(SLICE)
    record = rt.barrier.run(device, "deallocated", OWNER)
    assert record.result == "quarantined" and record.compute_mode_guard is False
    assert record.compute_instance_guard is True
    assert node.layout()[0] == []  # no compute instance: no MIG device a context could be created on
    with pytest.raises(RuntimeError, match="did not start"):
        Tenant(node, "MIG-q0")  # the next tenant cannot create a context on the quarantined slice
    state = rt.barrier.deps.store.load(SLICE)
    assert state.ci_guard is not None and state.ci_guard.layout == [(0, 0, 1)]
    assert rt.barrier.recover(device) is None  # still quarantined; the guard stays

    # Repaired: the same node (state directory, layout) under a new config path, which the stand-in reloads.
    repaired = tmp_path / "repaired.conf"
    repaired.write_text(node.config_path.read_text().replace("gpu.0.gi.0.error=999", "gpu.0.gi.0.error=0"))
    monkeypatch.setenv("DRA_STANDIN_CONFIG", str(repaired))
    restarted = build_runtime(agent_config(tmp_path), fsync=False)  # NVML lists no MIG device without a CI
    assert SLICE in restarted.barrier.deps.inventory  # known from the state, not forgotten
    again = restarted.barrier.operator_release(restarted.device(SLICE), "reviewed", "ops")
    assert again.result == "released", again.reason
    (new_uuid,) = node.layout()[0]
    assert again.compute_instances_recreated == ["MIG-q0", new_uuid] and new_uuid != "MIG-q0"
    assert again.uuid == new_uuid and restarted.barrier.deps.inventory[SLICE].uuid == new_uuid
    assert node.memory(0, 0).count(0x5A) < 8 * MiB  # filled after the recreate


def test_the_api_down_guard_on_mig_destroys_and_restores_the_compute_instance(standin: MakeNode,  # noqa: F811
                                                                               tmp_path: Path) -> None:
    node = _node(standin)
    rt = build_runtime(agent_config(tmp_path), fsync=False)
    device = rt.device(SLICE)
    assert rt.barrier.guard_unknown_locally(device) == "compute-instance"
    assert node.layout()[0] == []
    rt.barrier.mark_allocated(device, OWNER)  # the API answers: a live claim holds it -> lifted
    (new_uuid,) = node.layout()[0]
    state = rt.barrier.deps.store.load(SLICE)
    assert state.ci_guard is None and not state.local_guard and state.uuid == new_uuid


def test_the_api_down_guard_on_mig_is_refused_while_a_process_holds_it(standin: MakeNode,  # noqa: F811
                                                                        tmp_path: Path) -> None:
    node = _node(standin)
    rt = build_runtime(agent_config(tmp_path), fsync=False)
    tenant = Tenant(node, "MIG-q0")
    try:
        assert rt.barrier.guard_unknown_locally(rt.device(SLICE)) == "failed"  # IN_USE: never signalled
        assert tenant.alive() and node.layout()[0] == ["MIG-q0"]
    finally:
        tenant.stop()


def test_an_unguardable_quarantined_mig_slice_gets_a_best_effort_fill(standin: MakeNode,  # noqa: F811
                                                                       tmp_path: Path) -> None:
    """R570, no taint API, a process NVML does not list holds memory (so CI destroy is IN_USE): review r04.

    Nothing can keep a new context off the slice, so what a new context could allocate is zeroed.
    """
    node = _node(standin, unlisted_used=16 * MiB)
    rt = build_runtime(agent_config(tmp_path), fsync=False)
    record = rt.barrier.run(rt.device(SLICE), "deallocated", OWNER)
    assert record.result == "quarantined" and (record.reason or "").startswith("unaccounted memory")
    assert record.compute_mode_guard is False and record.compute_instance_guard is False
    assert any("best effort" in w for w in record.warnings), record.warnings
    assert node.layout()[0] == ["MIG-q0"]
    # Left with the old bytes: the hidden holder's 16 MiB, reserved (2 MiB) and our context's (4 MiB).
    assert node.memory(0, 0).count(0x5A) <= 22 * MiB
