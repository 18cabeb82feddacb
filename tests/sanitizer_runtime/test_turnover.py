"""Turnovers on the simulated node: the barrier signals only what the released claim owned (issue 20 5/6/9/13/15/18).

Each test is one of the review's scenarios (r01, r02, r03, r12, r16, item 18, D5), driven through
the agent as the watches drive it (claims as the API serves them, processes with the cgroup the
kubelet gives a pod's container).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from dra_constructs.agent.agent import Agent
from dra_constructs.agent.backends.base import ComputeMode
from dra_constructs.agent.backends.simulated import HOST_CGROUP, SimulatedCrash
from dra_constructs.agent.clock import VirtualClock
from dra_constructs.agent.config import SimulatedBackendSettings
from dra_constructs.agent.kube import Tenant
from dra_constructs.agent.state import Phase

from .conftest import SimEnv
from .fakeapi import claim

DEV = "gpu-0"
PA, PB, PC = ("aaaaaaaa-0000-4000-8000-00000000000a", "bbbbbbbb-0000-4000-8000-00000000000b",
              "cccccccc-0000-4000-8000-00000000000c")
WHOLE = SimulatedBackendSettings(gpus=1, mig_slices_per_gpu=0, memory_bytes=2048)


def _env(tmp_path: Path, version: str = "1.32") -> SimEnv:
    return SimEnv(tmp_path, version, simulated=WHOLE)


def _agent(env: SimEnv, claims: list[dict[str, Any]], pods: dict[str, dict[str, Any]] | None = None) -> Agent:
    """A fresh agent process (restart) that listed ``claims`` (what ``initial_list`` does)."""
    agent = Agent(env.restart(), clock=VirtualClock())
    agent._claims = {c["metadata"]["uid"]: c for c in claims}
    agent._pods = pods or {}
    agent._allocated = agent._map(claims)
    agent.api_known = True
    return agent


def _set(agent: Agent, *claims: dict[str, Any]) -> None:
    """The claims watch delivers this list (a re-list, or the sum of its events)."""
    agent._claims = {c["metadata"]["uid"]: c for c in claims}
    agent.reconcile()
    agent.wait()


def _records(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "evidence.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _pod(uid: str, name: str, deleting: bool = False, namespace: str = "team-a",
         claim: str | None = None) -> dict[str, Any]:
    """A pod of the node as the pods watch has it; ``claim``: the ResourceClaim it uses (as the API shows it)."""
    meta: dict[str, Any] = {"uid": uid, "name": name, "namespace": namespace}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    status: dict[str, Any] = {"phase": "Running"}
    if claim is not None:
        status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim}]
    return {"metadata": meta, "status": status}


A = claim("train-a", "team-a", "uid-A", [DEV], reserved=[PA])
B = claim("infer-b", "team-b", "uid-B", [DEV], reserved=[PB])


def _a_left_residue(env: SimEnv) -> Agent:
    """Agent up, claim A on the device, A's pod wrote and ended (its bytes stay)."""
    agent = _agent(env, [])
    agent.startup()
    agent.wait()
    _set(agent, A)
    env.node.start_tenant(DEV, [("obey", 1.0)], random.Random(7), pod=PA)
    env.node.kubelet_stop(DEV)
    assert env.node.audit(DEV).nonzero_bytes > 0
    return agent


# --- r01: restart (and API outage) during a turnover ------------------------------------------

def test_restart_during_a_turnover_sanitizes_before_the_new_pods_run(tmp_path: Path) -> None:
    env = _env(tmp_path)
    _a_left_residue(env)
    env.node.agent_died()  # ... A's claim is deallocated and B gets the device meanwhile
    before = len(_records(tmp_path))
    agent = _agent(env, [B])
    agent.startup()
    agent.wait()
    (record,) = _records(tmp_path)[before:]
    assert record["trigger"] == "missed-turnover" and record["result"] == "released"
    assert record["claim"] == "team-a/train-a" and record["pods"] == [PA]  # the released claim, not B
    assert env.node.audit(DEV).clean  # A's bytes are gone before B's pods run
    state = env.rt.barrier.deps.store.load(DEV)
    assert state.phase is Phase.ALLOCATED and state.claim == "team-b/infer-b" and state.claim_uids == ["uid-B"]
    assert env.node.compute_mode(DEV) is ComputeMode.DEFAULT  # B may create contexts now
    assert any(e["reason"] == "MissedTurnover" for e in env.kube.events)
    assert b'dra_sanitizer_missed_turnovers_total{outcome="barrier"} 1.0' in env.rt.metrics.render()


def test_after_an_api_outage_the_first_list_compares_the_stored_claim(tmp_path: Path) -> None:
    env = _env(tmp_path)
    _a_left_residue(env)
    env.node.agent_died()
    agent = _agent(env, [])
    agent.api_known = False  # the claims cannot be listed at start
    agent.startup()
    agent.wait()
    assert env.rt.barrier.deps.store.load(DEV).claim == "team-a/train-a"  # nothing decided without the claims
    _set(agent, B)  # the first successful list: B holds it now
    assert _records(tmp_path)[-1]["trigger"] == "missed-turnover" and env.node.audit(DEV).clean
    assert env.rt.barrier.deps.store.load(DEV).claim == "team-b/infer-b"


def test_a_new_tenant_already_running_is_reported_not_killed_and_its_release_runs_the_barrier(
        tmp_path: Path) -> None:
    env = _env(tmp_path)
    _a_left_residue(env)
    env.node.agent_died()
    b_pids = env.node.start_tenant(DEV, [("obey", 1.0)], random.Random(8), exited_residue=False, pod=PB)
    agent = _agent(env, [B], pods={PB: _pod(PB, "infer-b-0", namespace="team-b", claim="infer-b")})
    agent.startup()
    agent.wait()
    record = _records(tmp_path)[-1]
    assert record["kind"] == "missed-turnover" and record["result"] == "adopted"
    assert record["attestation"]["driver_version"] == "570.124.06"  # every record attests the driver regime
    assert record["pids_sigterm"] == record["pids_sigkill"] == []
    assert [p["pid"] for p in record["foreign_processes"]] == b_pids
    assert record["foreign_processes"][0]["owner"] == f"pod team-b/infer-b-0 (uid {PB})"
    assert record["missed_turnover"] == "team-a/train-a"
    assert env.node.audit(DEV).live_contexts == len(b_pids)  # B lives
    assert env.node.compute_mode(DEV) is ComputeMode.DEFAULT
    state = env.rt.barrier.deps.store.load(DEV)
    assert state.phase is Phase.ALLOCATED and state.claim == "team-b/infer-b"
    assert state.missed_turnover == "team-a/train-a" and set(state.pod_uids) == {PA, PB}
    assert b'dra_sanitizer_missed_turnovers_total{outcome="adopted"} 1.0' in env.rt.metrics.render()
    _set(agent)  # B is released: the whole barrier, B's processes drained, the missed turnover on record
    last = _records(tmp_path)[-1]
    assert last["trigger"] == "deallocated" and last["result"] == "released"
    assert last["pids_sigterm"] == b_pids and last["missed_turnover"] == "team-a/train-a"
    assert env.node.audit(DEV).clean


# --- r02: a watch re-list ----------------------------------------------------------------------

def test_a_relist_showing_another_claim_never_signals_its_live_tenant(tmp_path: Path) -> None:
    env = _env(tmp_path)
    agent = _a_left_residue(env)
    b_pids = env.node.start_tenant(DEV, [("ignore-term", 0.0)], random.Random(2), exited_residue=False, pod=PB)
    _set(agent, B)  # the watch missed A's deallocation and B's allocation: one re-list shows B
    record = _records(tmp_path)[-1]
    assert record["trigger"] == "missed-turnover" and record["result"] == "adopted"
    assert record["pids_sigterm"] == record["pids_sigkill"] == []
    assert env.node.audit(DEV).live_contexts == len(b_pids)


def test_a_relist_before_the_new_pods_run_sanitizes(tmp_path: Path) -> None:
    env = _env(tmp_path)
    agent = _a_left_residue(env)
    _set(agent, B)
    record = _records(tmp_path)[-1]
    assert record["trigger"] == "missed-turnover" and record["result"] == "released"
    assert env.node.audit(DEV).clean and env.rt.barrier.deps.store.load(DEV).claim == "team-b/infer-b"


# --- r03: shared devices -----------------------------------------------------------------------

def test_a_shared_device_is_sanitized_only_when_its_last_claim_goes(tmp_path: Path) -> None:
    env = _env(tmp_path, "1.34")
    a = claim("server", "team-a", "uid-A", [DEV], reserved=[PA])
    b = claim("job", "team-a", "uid-B", [DEV], reserved=[PB])
    agent = _agent(env, [])
    agent.startup()
    agent.wait()
    before = len(_records(tmp_path))
    _set(agent, a, b)
    a_pids = env.node.start_tenant(DEV, [("obey", 1.0)], random.Random(1), exited_residue=False, pod=PA)
    b_pids = env.node.start_tenant(DEV, [("ignore-term", 0.0)], random.Random(2), exited_residue=False, pod=PB)
    _set(agent, a)  # B's claim goes; its stuck process is not touched while A holds the device
    assert _records(tmp_path)[before:] == []
    assert env.node.audit(DEV).live_contexts == len(a_pids) + len(b_pids)
    assert env.kube.tainted(DEV)["spec"]["taint"]["value"] == "in-use"
    assert env.rt.barrier.deps.store.load(DEV).phase is Phase.ALLOCATED
    _set(agent)  # the last claim goes: one barrier drains both claims' pods
    (record,) = _records(tmp_path)[before:]
    assert record["result"] == "released" and set(record["pids_sigterm"]) == {*a_pids, *b_pids}
    assert record["claim"] == "team-a/server, team-a/job" and set(record["pods"]) == {PA, PB}
    assert env.node.audit(DEV).clean


def test_one_shared_claims_pods_terminating_does_not_prohibit_the_other(tmp_path: Path) -> None:
    env = _env(tmp_path)
    a = claim("server", "team-a", "uid-A", [DEV], reserved=[PA])
    b = claim("job", "team-a", "uid-B", [DEV], reserved=[PB])
    agent = _agent(env, [])
    agent.startup()
    agent.wait()
    agent._pods = {PA: _pod(PA, "server-0"), PB: _pod(PB, "job-0", deleting=True)}
    _set(agent, a, b)
    agent.pods_changed()
    assert env.node.compute_mode(DEV) is ComputeMode.DEFAULT
    agent._pods = {PA: _pod(PA, "server-0", deleting=True), PB: _pod(PB, "job-0", deleting=True)}
    agent.pods_changed()
    assert env.node.compute_mode(DEV) is ComputeMode.PROHIBITED


# --- r12: a no-surge rollout on a shared standalone claim (1.32) -------------------------------

def test_a_rollout_onto_the_same_claim_gets_its_compute_mode_back(tmp_path: Path) -> None:
    env = _env(tmp_path)
    agent = _agent(env, [])
    agent.startup()
    agent.wait()
    old, new = PA, PB
    agent._pods = {old: _pod(old, "web-old")}
    _set(agent, claim("shared", "team-a", "c", [DEV], reserved=[old]))
    agent._pods = {old: _pod(old, "web-old", deleting=True)}
    agent.pods_changed()
    assert env.node.compute_mode(DEV) is ComputeMode.PROHIBITED  # the last pod leaves: no new context
    agent._pods = {old: _pod(old, "web-old", deleting=True), new: _pod(new, "web-new")}
    _set(agent, claim("shared", "team-a", "c", [DEV], reserved=[old, new]))
    assert env.node.compute_mode(DEV) is ComputeMode.DEFAULT  # a running pod holds the claim again
    assert not env.rt.barrier.deps.store.load(DEV).leaving_guard
    # Restarted while PROHIBITED: the saved flag lets the new agent lift it too.
    agent._pods = {new: _pod(new, "web-new", deleting=True)}
    _set(agent, claim("shared", "team-a", "c", [DEV], reserved=[new]))
    assert env.node.compute_mode(DEV) is ComputeMode.PROHIBITED
    newest = "dddddddd-0000-4000-8000-00000000000d"
    later = claim("shared", "team-a", "c", [DEV], reserved=[newest])
    agent = _agent(env, [later], pods={newest: _pod(newest, "web-newest")})
    agent.startup()
    agent.pods_changed()
    assert env.node.compute_mode(DEV) is ComputeMode.DEFAULT


# --- r16: processes no claim owns ----------------------------------------------------------------

def test_first_start_signals_no_process_without_a_claim_and_sanitizes_once_they_are_gone(tmp_path: Path) -> None:
    env = _env(tmp_path, "1.34")
    host = env.node.start_tenant(DEV, [("ignore-term", 0.0)], random.Random(3), cgroup=HOST_CGROUP)
    plugin = env.node.start_tenant(DEV, [("ignore-term", 0.0)], random.Random(4), exited_residue=False, pod=PC)
    agent = _agent(env, [], pods={PC: _pod(PC, "nvidia-device-plugin-x")})
    agent.startup()
    agent.wait()
    record = _records(tmp_path)[-1]
    assert record["trigger"] == "startup-unknown" and record["result"] == "quarantined"
    assert record["pids_sigterm"] == record["pids_sigkill"] == []
    assert (record["reason"] or "").startswith("foreign contexts")
    owners = {p["pid"]: p["owner"] for p in record["foreign_processes"]}
    assert owners[host[0]].startswith("host (/system.slice/slurmstepd.scope")
    assert owners[plugin[0]] == f"pod team-a/nvidia-device-plugin-x (uid {PC})"
    assert env.node.audit(DEV).live_contexts == 2  # both still run
    assert env.kube.tainted(DEV)["spec"]["taint"]["value"] == "quarantined"  # nobody new gets it
    assert any(e["reason"] == "ForeignContexts" for e in env.kube.events)
    metrics = env.rt.metrics.render()
    assert b'dra_sanitizer_foreign_contexts_total{owner="host"} 1.0' in metrics
    assert b'dra_sanitizer_foreign_contexts_total{owner="pod"} 1.0' in metrics
    agent.tick()
    agent.wait()
    assert env.rt.barrier.deps.store.load(DEV).phase is Phase.QUARANTINED  # still there: still guarded
    env.node.repair(DEV)  # the Slurm job and the plugin pod end
    agent.tick()
    agent.wait()
    last = _records(tmp_path)[-1]
    assert last["trigger"] == "zero-contexts" and last["result"] == "released"
    assert env.node.audit(DEV).clean and env.kube.tainted(DEV) is None


def test_a_foreign_process_beside_the_released_claims_is_reported_not_signalled(tmp_path: Path) -> None:
    env = _env(tmp_path, "1.34")
    env.rt.barrier.run(env.device, "startup-unknown")
    tenant = Tenant("team-a/c", "team-a", "uid-A", pods=(PA,))
    env.rt.barrier.mark_allocated(env.device, tenant)
    mine = env.node.start_tenant(DEV, [("obey", 2.0)], random.Random(5), pod=PA)
    other = env.node.start_tenant(DEV, [("obey", 2.0)], random.Random(6), exited_residue=False, pod=PB)
    record = env.rt.barrier.run(env.device, "deallocated", tenant)
    assert record.pids_sigterm == mine and record.result == "quarantined"
    assert [p["pid"] for p in record.foreign_processes] == other and env.node.audit(DEV).live_contexts == 1


# --- item 18 and D5 ------------------------------------------------------------------------------

def test_a_release_finished_after_a_crash_carries_the_drain_figure(tmp_path: Path) -> None:
    armed = {"on": True}

    def hook(device: str, point: str) -> None:
        if armed["on"] and point == "releasing":
            armed["on"] = False
            raise SimulatedCrash(point)

    env = SimEnv(tmp_path, crash_hook=hook, simulated=WHOLE)
    try:
        env.rt.barrier.run(env.device, "startup-unknown")
    except SimulatedCrash:
        env.node.agent_died()
    env.restart()
    record = env.rt.barrier.recover(env.device)
    assert record is not None and record.trigger == "recovery-release" and record.result == "released"
    assert record.contexts_after_drain == 0 and record.bytes_verified > 0


def test_a_releasing_state_without_its_proof_is_sanitized_again(tmp_path: Path) -> None:
    env = _env(tmp_path, "1.34")
    store = env.rt.barrier.deps.store
    state = store.load(DEV, env.device.uuid)
    state.phase, state.cycle, state.verified_cycle = Phase.RELEASING, 1, 1  # written by an older agent
    store.save(state)
    record = env.rt.barrier.recover(env.device)
    assert record is not None and record.trigger == "recovery" and record.result == "released"
    assert record.contexts_after_drain == 0


def test_api_down_no_quarantine_clears_itself_through_a_barrier(tmp_path: Path) -> None:
    """D5: with the claims unknown, a quarantine waiting for zero contexts is re-guarded, never drained."""
    env = _env(tmp_path, "1.34")
    env.rt.barrier.run(env.device, "startup-unknown")
    stuck = env.node.start_tenant(DEV, [("ignore-term", 0.0)], random.Random(9), exited_residue=False,
                                  cgroup=HOST_CGROUP)
    assert env.rt.barrier.run(env.device, "once").result == "quarantined"
    env.node.repair(DEV)
    before = len(_records(tmp_path))
    agent = _agent(env, [])
    agent.api_known = False
    agent.startup()
    agent.tick()
    agent.wait()
    assert _records(tmp_path)[before:] == [] and stuck
    assert env.rt.barrier.deps.store.load(DEV).phase is Phase.QUARANTINED
    _set(agent)  # the claims are known again: now it is sanitized
    assert _records(tmp_path)[-1]["trigger"] == "zero-contexts" and env.node.audit(DEV).clean
