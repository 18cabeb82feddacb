"""``simulate``'s turnover scenarios: the agent (not only the barrier) on a simulated node.

Each round picks one scenario on one whole GPU, with processes in the cgroups the kubelet gives
pods (or the host's) and claims as the API serves them (``status.reservedFor`` pod UIDs):

- ``shared``: two claims share the device (``allowMultipleAllocations``); one is released while
  the other's pod runs, then the other;
- ``relist``: the claims watch misses A's deallocation and B's allocation; one re-list shows B,
  whose pod runs already or not yet;
- ``restart``: the agent is down while A is deallocated and B allocated (B running or not);
- ``non-dra``: a process no claim owns (a host job, or another pod) holds a context on the device
  when a claim is released, or at the agent's start.

Counted from the simulated hardware and signaller, not from the agent's records:
``protected_signalled`` (a signal to a process the released claim did not own: a co-tenant,
the next tenant, a non-DRA process) and ``turnover_dirty`` (a device handed to the next claim's
pods with the previous tenant's bytes, through a barrier release or with nothing on record) must
be 0; ``silent_adoptions`` (a turnover with neither a barrier record nor a ``missed-turnover``
record) must be 0.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from dra_constructs.agent.agent import Agent
from dra_constructs.agent.backends.simulated import HOST_CGROUP, SimulatedNode
from dra_constructs.agent.clock import VirtualClock
from dra_constructs.agent.config import AgentConfig, KubeSettings, SimulatedBackendSettings
from dra_constructs.agent.runtime import build_runtime
from dra_constructs.agent.simkube import SimulatedKube

__all__ = ["SCENARIOS", "TURNOVER_FAILURES", "scratch_dir", "turnover_scenarios"]

SCENARIOS = ("shared", "relist", "restart", "non-dra")
#: Counters that must stay 0 (``simulate`` exits 1 otherwise).
TURNOVER_FAILURES = ("protected_signalled", "silent_adoptions", "turnover_dirty", "final_dirty")
_DEV = "gpu-0"


def scratch_dir() -> str | None:
    """Where a simulation keeps its agents' state directory: RAM (``/dev/shm``) where there is one.

    The state is thrown away at the end and written without fsync; on a disk, ext4 still starts
    writeback at every rename over an existing file (``auto_da_alloc``), a third of a schedule's
    wall time on a busy machine (docs/testing.md "Suite time"). None: the system's temp dir.
    """
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


def _claim(name: str, uid: str, pods: list[str]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "team-sim", "uid": uid},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "sim-node", "device": _DEV}]}},
                "reservedFor": [{"resource": "pods", "name": f"pod-{p[:8]}", "uid": p} for p in pods]}}


class _Round:
    """One scenario: a fresh node, the agent, and what the hardware saw."""

    def __init__(self, tmp: Path, rng: random.Random, version: str) -> None:
        self.rng = rng
        self.node = SimulatedNode(SimulatedBackendSettings(gpus=1, mig_slices_per_gpu=0, memory_bytes=2048))
        self.kube = SimulatedKube()
        self.config = AgentConfig(
            node_name="sim-node", backend="simulated", grace_period_s=30, drain_timeout_s=60,
            state_dir=str(tmp / "state"), evidence_file=str(tmp / "evidence.jsonl"),
            simulated=self.node.settings, kube=KubeSettings(mode="disabled", kubernetes_version=version),
            selftest_at_start=False)  # turnovers only; the canary's scenarios are tests/.../test_canary.py
        self.protected: set[int] = set()  # pids the claim being released does not own, now
        self.violations = 0
        real = self.node.signaller.signal

        def signal(pid: int, signum: int) -> bool:
            if pid in self.protected:
                self.violations += 1
            return real(pid, signum)

        self.node.signaller.signal = signal  # type: ignore[method-assign]
        self.agent = self.start([])

    def start(self, claims: list[dict[str, Any]]) -> Agent:
        """A fresh agent process that listed ``claims``; startup recovery done."""
        rt = build_runtime(self.config, kube_ops=self.kube, node=self.node, fsync=False)
        agent = Agent(rt, clock=VirtualClock())
        agent._claims = {c["metadata"]["uid"]: c for c in claims}
        agent._allocated = agent._map(claims)
        agent.api_known = True
        agent.startup()
        agent.wait()
        self.agent = agent
        return agent

    def show(self, *claims: dict[str, Any]) -> None:
        self.agent._claims = {c["metadata"]["uid"]: c for c in claims}
        self.agent.reconcile()
        self.agent.wait()

    def pod(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def tenant(self, pod: str, protected: bool, cgroup: str | None = None) -> list[int]:
        behaviour = self.rng.choice([("obey", self.rng.uniform(0, 40)), ("ignore-term", 0.0)])
        pids = self.node.start_tenant(_DEV, [behaviour], self.rng, exited_residue=not protected,
                                      pod=None if cgroup else pod, cgroup=cgroup)
        if protected:
            self.protected.update(pids)
        return pids

    def records(self) -> list[dict[str, Any]]:
        path = Path(self.config.evidence_file)
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _play(kind: str, r: _Round, counts: Counter[str]) -> None:
    a_pod, b_pod = r.pod(), r.pod()
    a = _claim("a", "uid-a", [a_pod])
    b = _claim("b", "uid-b", [b_pod])
    if kind == "shared":
        r.show(a, b)
        r.tenant(a_pod, protected=False)
        r.tenant(b_pod, protected=True)  # B runs on while A is released
        for pid in [p for p in list(r.node._dev(_DEV).processes) if p not in r.protected]:
            r.node._dev(_DEV).remove(pid)  # A's pod ended (its claim is deallocated after that)
        r.show(b)
        r.protected.clear()  # B is released now: its processes are its claim's to drain
        r.show()
        return
    b_runs = r.rng.random() < 0.5
    r.show(a)
    r.tenant(a_pod, protected=False)
    r.node.kubelet_stop(_DEV)
    before = len(r.records())
    if kind == "non-dra":
        r.tenant("", protected=True, cgroup=HOST_CGROUP if r.rng.random() < 0.5 else "0::/kubepods.slice/"
                 f"kubepods-besteffort.slice/kubepods-besteffort-pod{r.pod().replace('-', '_')}.slice/"
                 f"cri-containerd-{'e' * 64}.scope\n")
        r.show()
        r.node.repair(_DEV)  # the stray process ends
        r.agent.tick()
        r.agent.wait()
        return
    if kind == "restart":
        r.node.agent_died()
    if b_runs:
        r.tenant(b_pod, protected=True)
    if kind == "restart":
        r.start([b])
    else:
        r.show(b)
    new = r.records()[before:]
    counts["missed_turnovers"] += 1
    if not any(x["trigger"] == "missed-turnover" for x in new):
        counts["silent_adoptions"] += 1
    elif not b_runs and r.node.audit(_DEV).nonzero_bytes:
        counts["turnover_dirty"] += 1  # B's pods would start on A's bytes
    if any(x["result"] == "adopted" for x in new):
        counts["missed_turnovers_adopted"] += 1
    r.protected.clear()
    r.show()  # B released: the barrier drains B and proves the device clean


def turnover_scenarios(rounds: int, seed: int, kubernetes_version: str = "1.32") -> dict[str, int]:
    """Play ``rounds`` scenarios (round-robin over :data:`SCENARIOS`); the counters of the module docstring."""
    rng = random.Random(seed)
    counts: Counter[str] = Counter({"rounds": 0, "protected_signalled": 0, "silent_adoptions": 0,
                                    "turnover_dirty": 0, "missed_turnovers": 0, "missed_turnovers_adopted": 0,
                                    "foreign_processes_reported": 0, "final_dirty": 0})
    for index in range(rounds):
        kind = SCENARIOS[index % len(SCENARIOS)]
        with tempfile.TemporaryDirectory(prefix="dra-sanitizer-turnover-", dir=scratch_dir()) as tmp:
            r = _Round(Path(tmp), rng, kubernetes_version)
            _play(kind, r, counts)
            counts["rounds"] += 1
            counts[f"rounds_{kind}"] += 1
            counts["protected_signalled"] += r.violations
            counts["foreign_processes_reported"] += sum(len(x.get("foreign_processes") or []) for x in r.records())
            if not r.node.audit(_DEV).clean:
                counts["final_dirty"] += 1  # the round's last release left bytes or a context
    return dict(counts)
