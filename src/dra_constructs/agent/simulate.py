"""``dra-sanitizer simulate``: the real barrier on the simulated node, under random faults.

Each (device, cycle) is one schedule: a tenant with random processes (obeying SIGTERM after a
random delay, ignoring it, or never exiting) writes non-zero data and leaves; the barrier runs
while faults hit NVML, CUDA and the API at ``fault_rate`` per call and the agent is killed at
random crash points (then restarted from its state directory, as after a real crash). A
quarantined device is "repaired" (its stuck processes removed) and released by the operator,
which runs the barrier again.

The summary's ``dirty_releases`` is counted from the simulated hardware's own view: at the
moment a device is handed back (compute mode back to DEFAULT, or its taint deleted), any
non-zero byte in its memory or any live context on it counts. It must always be 0. Residue in
the memory the sanitizer's own context held is not hidden: it is counted apart
(``uncovered_residue_releases``/``_bytes``: what no user-space fill reaches while the driver's
scrub-on-free is off). ``released_without_proof`` counts ``released`` records (recovery
releases included) without verified bytes, with coverage below the threshold or without the
drain's ``contexts_after_drain``: it must be 0. Then the agent itself meets the turnovers the
barrier alone cannot see (:mod:`.simscenarios`, summary ``turnovers``).
"""

from __future__ import annotations

import contextlib
import math
import random
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dra_constructs.agent.backends.base import BackendError, ComputeMode
from dra_constructs.agent.backends.simulated import (
    DYNAMIC_PROFILES,
    FAULT_OPS,
    FaultInjector,
    SimulatedCrash,
    SimulatedNode,
)
from dra_constructs.agent.config import AgentConfig, KubeSettings, PartitionReset, SimulatedBackendSettings
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.evidence import EvidenceRecord
from dra_constructs.agent.kube import Tenant
from dra_constructs.agent.runtime import Runtime, build_runtime
from dra_constructs.agent.simkube import SimulatedKube
from dra_constructs.agent.simscenarios import scratch_dir, turnover_scenarios
from dra_constructs.agent.state import Phase

__all__ = ["SimulationSummary", "simulate"]

KUBE_FAULT_OPS = ("kube.apply", "kube.delete", "kube.event")
_MAX_CRASHES_PER_CYCLE = 3
_MAX_RESTARTS = 20
_MAX_OPERATOR_RELEASES = 5
_POLLED_OPS = ("nvml.processes", "nvml.gpu_lost")


@dataclass
class SimulationSummary:
    """What ``simulate`` prints (as JSON)."""

    devices: int
    cycles: int
    fault_rate: float
    seed: int
    kubernetes_version: str
    schedules: int = 0
    barrier_records: int = 0
    released: int = 0
    quarantined: int = 0
    operator_releases: int = 0
    left_quarantined: int = 0
    crashes: int = 0
    releases_observed: int = 0
    dirty_releases: int = 0
    dirty_release_details: list[dict[str, Any]] = field(default_factory=list)
    uncovered_residue_releases: int = 0
    uncovered_residue_bytes: int = 0
    released_without_proof: int = 0
    min_released_coverage: float | None = None
    recovery_releases: int = 0
    resets: int = 0
    partition_reset: str = "off"
    failures_without_reason: int = 0
    stuck_tenants_released: int = 0
    faults_injected: dict[str, int] = field(default_factory=dict)
    quarantine_reasons: dict[str, int] = field(default_factory=dict)
    #: The agent-level turnover scenarios (:mod:`.simscenarios`): shared devices, re-lists, restarts
    #: mid-turnover, non-DRA processes; ``protected_signalled``, ``silent_adoptions``,
    #: ``turnover_dirty`` and ``final_dirty`` must be 0.
    turnovers: dict[str, int] = field(default_factory=dict)
    wall_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return dict(self.__dict__)


class _Auditor:
    """Checks the hardware at every hand-back (compute mode DEFAULT, taint deleted)."""

    def __init__(self, summary: SimulationSummary) -> None:
        self.summary = summary
        self.node: SimulatedNode | None = None
        self.cycle = 0
        self._lock = threading.Lock()

    def _check(self, device: str, how: str, count: bool) -> None:
        assert self.node is not None
        audit = self.node.audit(device)
        with self._lock:
            if count:
                self.summary.releases_observed += 1
            if audit.uncovered_bytes and count:
                self.summary.uncovered_residue_releases += 1
                self.summary.uncovered_residue_bytes += audit.uncovered_bytes
            if not audit.clean:
                self.summary.dirty_releases += 1
                if len(self.summary.dirty_release_details) < 20:
                    self.summary.dirty_release_details.append({
                        "device": device, "cycle": self.cycle, "how": how,
                        "nonzero_bytes": audit.nonzero_bytes, "live_contexts": audit.live_contexts})

    def mode_changed(self, device: str, mode: ComputeMode) -> None:
        if mode is ComputeMode.DEFAULT:
            self._check(device, "compute mode DEFAULT", count=True)

    def untainted(self, device: str) -> None:
        self._check(device, "taint deleted", count=False)

    def handed_to_next_tenant(self, device: str) -> None:
        self._check(device, "prepared for the next tenant", count=False)


def _kind(reason: str | None) -> str:
    text = (reason or "").split(":", 1)[0]
    for marker in ("coverage", "verify found", "drain timeout", "context", "cannot list"):
        if marker in text:
            return marker
    return text[:40] or "?"


_DYNAMIC_PLACEMENTS = [start for _, _, _, starts in DYNAMIC_PROFILES for start in starts]


def _pick_placement(rt: Runtime, node: SimulatedNode, targets: list[str], rng: random.Random, gpus: int,
                    cycle: int) -> str | None:
    """A placement the scheduler could allocate: clean, untainted, no overlapping instance."""
    minor = (cycle * 7 + rng.randrange(gpus)) % gpus
    free = []
    for name in targets:
        info = rt.barrier.deps.inventory[name]
        if info.minor != minor or rt.barrier.deps.store.load(name).phase is not Phase.CLEAN:
            continue
        if rt.guard.has_taints and any(rt.guard.held(o) for o in rt.guard.overlaps(name)):
            continue  # a guard on an overlapping placement keeps the scheduler away
        if any(node.instance_exists(o) for o in [name, *rt.guard.overlaps(name)]):
            continue  # the counters: an overlapping instance consumes the slices
        free.append(name)
    return rng.choice(free) if free else None


def simulate(devices: int = 56, cycles: int = 10, fault_rate: float = 0.05, seed: int = 0,
             records: str | None = None, kubernetes_version: str = "1.34",
             crash_rate: float | None = None, memory_bytes: int = 4096,
             partition_reset: str = "off", dynamic_mig: bool = False,
             turnover_rounds: int | None = None) -> SimulationSummary:
    """Run ``devices`` x ``cycles`` schedules, then ``turnover_rounds`` (default 4 x cycles) agent scenarios."""
    started = time.perf_counter()
    summary = SimulationSummary(devices, cycles, fault_rate, seed, kubernetes_version,
                                partition_reset=partition_reset)
    rng = random.Random(seed)
    crash_p = fault_rate if crash_rate is None else crash_rate
    rates = dict.fromkeys((*FAULT_OPS, *KUBE_FAULT_OPS), fault_rate)
    for polled in _POLLED_OPS:  # called every poll interval while draining: per call, much rarer
        rates[polled] = fault_rate / 10
    faults = FaultInjector(rng, rates)
    per_gpu = len(_DYNAMIC_PLACEMENTS) if dynamic_mig else 7
    gpus = max(1, math.ceil(devices / per_gpu))
    settings = SimulatedBackendSettings(gpus=gpus, mig_slices_per_gpu=7, memory_bytes=memory_bytes,
                                        dynamic_mig=dynamic_mig)
    auditor = _Auditor(summary)
    node = SimulatedNode(settings, faults, on_compute_mode=auditor.mode_changed)
    auditor.node = node
    kube = SimulatedKube(faults, on_untaint=auditor.untainted)
    with tempfile.TemporaryDirectory(prefix="dra-sanitizer-sim-", dir=scratch_dir()) as tmp:
        config = AgentConfig(
            node_name="sim-node", backend="simulated", grace_period_s=30, drain_timeout_s=60,
            state_dir=str(Path(tmp) / "state"), evidence_file=records or str(Path(tmp) / "evidence.jsonl"),
            simulated=settings, kube=KubeSettings(mode="disabled", kubernetes_version=kubernetes_version,
                                                  retries=5, retry_backoff_s=0.5),
            partition_reset=PartitionReset(partition_reset),
        )
        crashes_this_cycle = [0]

        def crash_hook(device: str, point: str) -> None:
            if crashes_this_cycle[0] < _MAX_CRASHES_PER_CYCLE and rng.random() < crash_p:
                crashes_this_cycle[0] += 1
                summary.crashes += 1
                raise SimulatedCrash(f"{device} at {point}")

        def runtime() -> Runtime:  # a fresh agent process: nothing kept but the state directory
            return build_runtime(config, kube_ops=kube, node=node, crash_hook=crash_hook, fsync=False)

        rt = runtime()
        targets = [d.name for d in rt.devices[:devices]]

        def cur(r: Runtime, name: str) -> DeviceInfo:
            """The device as the agent knows it now (a cold reset changes a MIG device's UUID)."""
            return r.barrier.deps.inventory[name]

        def settle(name: str, run: Any) -> EvidenceRecord | None:
            """Run, and after each crash restart the agent and recover, until the device settles."""
            nonlocal rt
            record: EvidenceRecord | None = None
            for _ in range(_MAX_RESTARTS):
                try:
                    record = run(rt)
                except SimulatedCrash:
                    node.agent_died()
                    rt = runtime()
                    run = lambda r, n=name: r.barrier.recover(cur(r, n))  # noqa: E731
                    continue
                if record is not None:
                    _account(record)
                state = rt.barrier.deps.store.load(name)
                if state.phase in (Phase.CLEAN, Phase.QUARANTINED):
                    return record
                run = lambda r, n=name: r.barrier.recover(cur(r, n))  # noqa: E731 - finish an interrupted release
            return record

        def _account(record: EvidenceRecord) -> None:
            summary.barrier_records += 1
            if record.reset_new_uuid and record.result == "released":
                summary.resets += 1
            if record.result == "released":
                summary.released += 1
                if record.trigger == "recovery-release":
                    summary.recovery_releases += 1
                if (record.bytes_verified <= 0 or (record.coverage_of_free or 0.0) < config.coverage_threshold
                        or record.contexts_after_drain is None):
                    summary.released_without_proof += 1
                coverage = record.coverage_of_free or 0.0  # of free after our context (docs: "min coverage")
                if summary.min_released_coverage is None or coverage < summary.min_released_coverage:
                    summary.min_released_coverage = coverage
            elif record.result == "quarantined":
                summary.quarantined += 1
                reason = _kind(record.reason)
                summary.quarantine_reasons[reason] = summary.quarantine_reasons.get(reason, 0) + 1
                if not record.reason:
                    summary.failures_without_reason += 1

        def operator_repairs(name: str) -> None:
            """A quarantined device is repaired and released by the operator (a full barrier)."""
            state = rt.barrier.deps.store.load(name)
            for _ in range(_MAX_OPERATOR_RELEASES):
                if state.phase is not Phase.QUARANTINED:
                    return
                if not state.reason:
                    summary.failures_without_reason += 1
                node.repair(name)
                summary.operator_releases += 1
                crashes_this_cycle[0] = 0
                settle(name, lambda r, n=name: r.barrier.operator_release(cur(r, n), "simulated repair", "simulate"))
                state = rt.barrier.deps.store.load(name)

        for name in targets:  # agent start: every never-seen device is sanitized first
            crashes_this_cycle[0] = 0
            settle(name, lambda r, n=name: r.barrier.recover(cur(r, n)))
            operator_repairs(name)
        # DynamicMIG: one claim per GPU and cycle, on a random placement the scheduler could pick.
        slots: list[str | None] = [None] * gpus if dynamic_mig else list(targets)
        for cycle in range(cycles):
            auditor.cycle = cycle
            for slot in slots:
                picked = slot if slot is not None else _pick_placement(rt, node, targets, rng, len(slots), cycle)
                if picked is None:
                    continue
                name = picked
                state = rt.barrier.deps.store.load(name)
                if state.phase is Phase.QUARANTINED:
                    continue  # still out of service after the operator gave up on it
                summary.schedules += 1
                crashes_this_cycle[0] = 0
                pod = str(uuid.UUID(int=rng.getrandbits(128), version=4))  # the claim's pod (reservedFor)
                tenant = Tenant(f"team-{cycle % 5}/claim-{cycle}-{name}", f"team-{cycle % 5}",
                                f"uid-{cycle}-{name}", boundary=f"team-{cycle % 5}", pods=(pod,))
                rt.barrier.mark_allocated(cur(rt, name), tenant)
                behaviours = []
                for _ in range(rng.randint(1, 3)):
                    draw = rng.random()
                    if draw < fault_rate / 2:
                        behaviours.append(("unkillable", 0.0))
                    elif draw < fault_rate:
                        behaviours.append(("ignore-term", 0.0))
                    else:
                        behaviours.append(("obey", rng.uniform(0, 45)))
                if dynamic_mig:
                    # What the next tenant's new instance can read: checked before it exists.
                    auditor.handed_to_next_tenant(name)
                    node.prepare(name)  # the DRA driver creates the instance at prepare
                node.start_tenant(name, behaviours, rng, pod=pod)
                stuck = any(b == "unkillable" for b, _ in behaviours)
                if dynamic_mig and rng.random() < 0.7:  # usually the driver has unprepared by now
                    node.kubelet_stop(name)
                    with contextlib.suppress(BackendError):  # IN_USE: a D-state process keeps it
                        node.unprepare(name)
                settle(name, lambda r, n=name, t=tenant: r.barrier.run(cur(r, n), "deallocated", t))
                state = rt.barrier.deps.store.load(name)
                if stuck and state.phase is not Phase.QUARANTINED:
                    summary.stuck_tenants_released += 1  # must stay 0: a D-state process never drains
                operator_repairs(name)
                if dynamic_mig and rt.barrier.deps.store.load(name).phase is Phase.CLEAN:
                    with contextlib.suppress(BackendError):
                        node.unprepare(name)  # the driver's retried unprepare, after the barrier
        summary.left_quarantined = sum(
            1 for n in targets if rt.barrier.deps.store.load(n).phase is Phase.QUARANTINED)
    summary.faults_injected = dict(Counter(faults.injected))
    summary.turnovers = turnover_scenarios(4 * cycles if turnover_rounds is None else turnover_rounds, seed,
                                           kubernetes_version)
    summary.wall_seconds = round(time.perf_counter() - started, 3)
    return summary
