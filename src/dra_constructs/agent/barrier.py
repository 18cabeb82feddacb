"""The preemption barrier, per device: guard, drain, verify contexts, zero-fill, verify, release.

Fail-closed: any failure (a drain past its limit, a context that should not be there, a CUDA
error, coverage below the threshold, a non-zero word, an unexpected exception) quarantines the
device, and only that device: state ``quarantined`` with the reason, the DeviceTaintRule value
``quarantined``, NVML compute mode ``PROHIBITED`` (policy permitting), an Event, and an
evidence record. It stays so until an operator release, which runs the whole barrier again.

Crash safety: the phase being entered is persisted before any of its effects (see
:mod:`.state`); ``crash_hook`` lets fault tests kill the agent at every such point.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from dra_constructs.agent.backends.base import (
    BackendError,
    ComputeInstanceGuard,
    ComputeMode,
    ComputeModeUnsupported,
    MemoryInfo,
    MemoryScrubber,
    NvmlBackend,
    PartitionBackend,
    ProcessSignaller,
    ScrubSession,
    VerifyResult,
)
from dra_constructs.agent.clock import Clock
from dra_constructs.agent.config import CUDA_ALLOCATION_GRANULE, AgentConfig, PartitionReset, QuarantinePolicy
from dra_constructs.agent.devhandles import HandleHolder, HandleScan
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.evidence import EvidenceRecord, EvidenceWriter
from dra_constructs.agent.gpulock import GpuLock, GpuLocks
from dra_constructs.agent.guard import Guard, GuardError
from dra_constructs.agent.health import HealthSource, attest, baseline, carried_since, check
from dra_constructs.agent.kube import Tenant
from dra_constructs.agent.metrics import Metrics
from dra_constructs.agent.migaccess import MIG_UNMANAGEABLE, MigAccess
from dra_constructs.agent.owners import Owner
from dra_constructs.agent.policy import ContextsRemaining, PreemptionPolicy
from dra_constructs.agent.state import CiGuardRecord, DeviceState, Phase, ResetRecord, StateStore, VerifyFigures

__all__ = ["AWAITING_ZERO_CONTEXTS", "CRASH_POINTS", "FOREIGN_CONTEXTS", "HANDLE_SCAN_FAILED", "Barrier", "BarrierDeps",
           "BarrierFailure", "check_verify", "memory_figures", "record_verify"]

_LOG = logging.getLogger("dra_sanitizer.barrier")

#: Every point at which fault tests may kill the agent (``crash_hook(device, point)``).
CRASH_POINTS: tuple[str, ...] = (
    "guard", "drain", "drain-signalled", "drain-killed", "verify-contexts", "fill", "fill-opened",
    "filled", "verify", "verified", "releasing", "release-mode", "release-untainted", "quarantine",
    "quarantine-mode", "quarantine-tainted", "resetting", "reset-destroyed", "reset-created", "transient-intent",
    "transient-created", "transient-destroyed",
)

#: Reason prefix of a device quarantined by a claim's ``onContextsRemaining: Quarantine`` policy:
#: the agent itself sanitizes it once NVML reports zero contexts (no operator needed).
AWAITING_ZERO_CONTEXTS = "awaiting zero contexts"
#: Reason prefix of a device held back by processes the released claims did not own (another
#: pod, the host, an unknown owner): never signalled; sanitized once NVML lists none of them.
FOREIGN_CONTEXTS = "foreign contexts"
#: Reason prefix of a release refused because the ``/proc/*/fd`` scan (:mod:`.devhandles`) could
#: not run: processes holding the device's nodes cannot be ruled out. Fail closed (the scan was
#: configured, so its answer is part of the proof); retried by the agent until a scan runs.
HANDLE_SCAN_FAILED = "device handle scan failed"
_SELF_CLEARING = (AWAITING_ZERO_CONTEXTS, FOREIGN_CONTEXTS, HANDLE_SCAN_FAILED)

#: Reason prefix of a DynamicMIG quarantine whose fill did not count because the transient
#: instance vanished under it (the kubelet plugin destroys instances it did not create when it
#: starts): the agent's tick runs the barrier again, the placement stays guarded meanwhile.
TRANSIENT_VANISHED = "transient instance vanished"


#: What a fill may leave unallocated: it allocates 2 MiB-aligned chunks until less than one is free
#: (``cuMemAlloc`` granularity on current GPUs; backends/cuda.py ``_ALIGN``).
FILL_SLACK_BYTES = CUDA_ALLOCATION_GRANULE

_AFTER_DRAIN = "after the drain"
_GI_CREATE = "nvmlDeviceCreateGpuInstanceWithPlacement"
_SAME_RECOVERY_AS_GUARD = frozenset({Phase.DRAIN, Phase.VERIFY_CONTEXTS, Phase.FILL, Phase.VERIFY})


class BarrierFailure(Exception):
    """The device could not be proven clean; the message is the quarantine reason."""


class _Deferred(BarrierFailure):
    """DynamicMIG: the agent cannot manage MIG; the placement stays guarded, said once node-wide."""


@dataclass
class BarrierDeps:
    """Everything a barrier talks to; real or simulated."""

    config: AgentConfig
    nvml: NvmlBackend
    scrubber: MemoryScrubber
    signaller: ProcessSignaller
    guard: Guard
    store: StateStore
    evidence: EvidenceWriter
    clock_for: Callable[[str], Clock]
    metrics: Metrics | None = None
    crash_hook: Callable[[str, str], None] | None = None
    scrub_on_free_disabled: bool | None = None
    own_pids: set[int] = field(default_factory=set)
    partitions: PartitionBackend | None = None
    #: The current info of every device by name (a cold reset changes a MIG device's UUID).
    inventory: dict[str, DeviceInfo] = field(default_factory=dict)
    #: Static MIG without compute mode (NVML before CUDA 13.3): destroys / recreates compute instances.
    ci_guard: ComputeInstanceGuard | None = None
    #: Why a claim-requested reset of this kind cannot be done here (None: it can); None: always can.
    reset_unavailable: Callable[[str], str | None] | None = None
    #: Who owns a PID (:mod:`.owners`); the default knows nobody, so nothing is signalled.
    owners: Callable[[int], Owner] = lambda _pid: Owner("unknown", detail="no owner lookup")
    #: ``namespace/name`` of a pod UID on this node, if the agent's pod list knows it (reports only).
    pod_name: Callable[[str], str | None] = lambda _uid: None
    #: Why a pod UID of the released claims' ``status.reservedFor`` is not trusted for signalling
    #: (pod UID, the claims ``ns/name, ...``) or None; the agent cross-checks its pod list (:meth:`.Agent.pod_check`).
    pod_check: Callable[[str, str | None], str | None] = lambda _uid, _claims: None
    #: DynamicMIG: whether this process can create/destroy MIG instances (None: assumed it can).
    mig_access: MigAccess | None = None
    #: Health gates and driver-state attestation (:mod:`.health`); None: the backend serves neither.
    health: HealthSource | None = None
    #: Processes holding the device's nodes beyond NVML's lists (:mod:`.devhandles`); None: NVML only.
    device_handles: Callable[[DeviceInfo], HandleScan] | None = None


class _Cycle:
    """The mutable bookkeeping of one run: evidence record + phase timing."""

    def __init__(self, deps: BarrierDeps, device: DeviceInfo, state: DeviceState, trigger: str) -> None:
        self.deps = deps
        self.device = device
        #: The hardware the cycle works on: the device, its current MIG instance, a transient
        #: instance (DynamicMIG), the recreated one after a reset; None: no instance exists.
        self.target: DeviceInfo | None = device
        self.transient: DeviceInfo | None = None
        #: A cold reset was cut off (crash): the instance may be gone or have a new UUID.
        self.resuming_reset = state.phase is Phase.RESETTING or (
            state.reset is not None and state.reset.new_uuid is None)  # or one that failed half-way
        self.state = state
        self.clock = deps.clock_for(device.name)
        self.policy = PreemptionPolicy.model_validate(state.policy) if state.policy else None
        self.record = EvidenceRecord(
            node=deps.config.node_name, device=device.name, uuid=device.uuid, cycle=state.cycle,
            trigger=trigger, claim=state.claim, tenant_namespace=state.tenant_namespace,
            started_at=self.clock.wall(), scrub_on_free_disabled=deps.scrub_on_free_disabled,
            taint=deps.guard.describe(device.name), boundary=state.boundary, policy=state.policy,
            attestation=attest(deps.health, device, deps.scrub_on_free_disabled),
        )
        self._phase: str | None = None
        self._phase_start = 0.0
        #: NVML refused a compute mode on this MIG device (before CUDA 13.3): it is DEFAULT, unguardable so.
        self.mode_unsupported = False
        #: Processes seen holding the device's nodes (:mod:`.devhandles`), by pid, and NVML's pids.
        self.holders: dict[int, HandleHolder] = {}
        self.nvml_pids: set[int] = set()
        #: A cold reset was done in this cycle (the health gates count across it: :func:`.health.check`).
        self.reset_done = False

    def enter(self, phase: Phase, point: str | None = None) -> None:
        """Persist ``phase`` (before its effects), time the previous one, then the crash point."""
        now = self.clock.monotonic()
        if self._phase is not None:
            self.record.phase_seconds[self._phase] = round(now - self._phase_start, 6)
        self._phase, self._phase_start = phase.value, now
        self.state.phase = phase
        self.state.updated = self.clock.wall()
        # Phases after GUARD and before RELEASING all recover alike: no fsync needed for them.
        self.deps.store.save(self.state, durable=phase not in _SAME_RECOVERY_AS_GUARD)
        self.crash(point or phase.value)

    def end_phase(self) -> None:
        if self._phase is not None:
            self.record.phase_seconds[self._phase] = round(self.clock.monotonic() - self._phase_start, 6)
            self._phase = None

    def crash(self, point: str) -> None:
        if self.deps.crash_hook is not None:
            self.deps.crash_hook(self.device.name, point)

    def set_mode(self, mode: ComputeMode) -> bool:
        """Best-effort compute-mode change; failures become warnings in the evidence.

        MIG before the CUDA 13.3 NVML cannot change it: DEFAULT is then True (it is DEFAULT),
        any other mode False with one warning per cycle (the guard is the taint, the
        compute-instance guard at quarantine, and the checks around the fill).
        """
        if self.target is None:
            return False  # no instance at this placement (DynamicMIG): nothing can hold a context
        try:
            self.deps.nvml.set_compute_mode(self.target, mode)
            return True
        except ComputeModeUnsupported as error:
            if mode is ComputeMode.DEFAULT:
                return True  # "On MIG-enabled GPUs, compute mode would be set to DEFAULT"
            if not self.mode_unsupported:
                self.record.warnings.append(
                    f"compute mode {mode.value}: {error}; no compute-mode guard on this MIG device: the taint "
                    f"guards it, a context beside the fill is caught by the checks before and after it")
            self.mode_unsupported = True
            return False
        except BackendError as error:
            self.record.warnings.append(f"compute mode {mode.value}: {error}")
            return False


class Barrier:
    """Runs barrier cycles; thread-safe across devices (one per-device file lock each)."""

    def __init__(self, deps: BarrierDeps) -> None:
        self.deps = deps
        self._gpu_locks = GpuLocks(deps.store.root / "locks")

    def _parent_lock(self, device: DeviceInfo) -> GpuLock | None:
        """DynamicMIG: the lock of the GPU a barrier on ``device`` takes (None: no per-GPU lock).

        One barrier or recovery at a time per GPU, node-wide (overlapping placements and the
        whole GPU share memory slices; see :mod:`.gpulock`). Reentrant: a recovery holds it and
        may run the whole barrier. Taken before the per-device file lock, everywhere.
        """
        if not device.dynamic:
            return None
        return self._gpu_locks.get(device.gpu_uuid)

    @contextlib.contextmanager
    def _one_per_gpu(self, device: DeviceInfo) -> Iterator[None]:
        """Hold the DynamicMIG per-GPU lock of ``device`` (nothing for other devices)."""
        parent = self._parent_lock(device)
        if parent is None:
            yield
            return
        with parent:
            yield

    # --- entry points -----------------------------------------------------------------------

    def run(self, device: DeviceInfo, trigger: str, tenant: Tenant | None = None) -> EvidenceRecord:
        """One full cycle from the guard on; returns (and writes) its evidence record."""
        with self._one_per_gpu(device), self.deps.store.lock(device.name):
            state = self.deps.store.load(device.name, device.uuid)
            if state.phase is not Phase.RESETTING:
                state.uuid = device.uuid
            state.cycle += 1
            state.verify = None
            state.local_guard = state.leaving_guard = False  # the barrier owns the compute mode from here on
            if tenant is not None:
                # A shared device: every claim that held it since its last clean release is on record.
                shared = state.phase is Phase.ALLOCATED and state.claim and len(state.claim_uids) > 1
                state.claim = _joined(state.claim, tenant.claim) if shared and state.claim else tenant.claim
                state.tenant_namespace = tenant.namespace if not shared else state.tenant_namespace
                state.boundary = tenant.boundary or state.boundary
                if tenant.policy is not None:
                    state.policy = tenant.policy.model_dump(by_alias=True, mode="json")
                _add_holder(state, tenant)
            cycle = _Cycle(self.deps, device, state, trigger)
            cycle.record.pods = list(state.pod_uids)
            cycle.record.missed_turnover = state.missed_turnover
            if state.phase is Phase.RESETTING and state.reset is not None:
                cycle.record.warnings.append(
                    f"recovering from a {state.reset.reset_type} reset cut off at {state.reset.started:.3f} "
                    f"(old UUID {state.reset.old_uuid})")
                cycle.record.reset_old_uuid = state.reset.old_uuid
            return self._cycle(cycle)

    def recover(self, device: DeviceInfo, barrier_allowed: bool = True) -> EvidenceRecord | None:
        """After a restart: redo an interrupted barrier, finish a verified release, re-guard.

        DynamicMIG: under the per-GPU lock, like a barrier. Finishing a release destroys a
        transient instance and removes overlap guards; without the lock it would run beside
        another placement's barrier (two transient instances, or one refused by the other's).
        ``barrier_allowed=False`` (API down): finish releases and re-guard only; nothing that
        could signal a process runs.
        """
        with self._one_per_gpu(device):
            return self._recover(device, barrier_allowed)

    def _recover(self, device: DeviceInfo, barrier_allowed: bool = True) -> EvidenceRecord | None:
        state = self.deps.store.load(device.name, device.uuid)
        if state.phase.needs_barrier:
            if not barrier_allowed:
                return None
            return self.run(device, "recovery" if state.phase is not Phase.UNKNOWN else "startup-unknown")
        if state.phase is Phase.RELEASING:
            if not self._has_proof(device):
                # No saved proof (a state written before the figures were kept): never call it
                # released without one; sanitize again from the start.
                return self.run(device, "recovery") if barrier_allowed else None
            with self.deps.store.lock(device.name):
                state = self.deps.store.load(device.name, device.uuid)
                if (state.phase is not Phase.RELEASING or state.verified_cycle != state.cycle
                        or state.verify is None):  # (a proof checked just above; changed since: not ours)
                    return None
                cycle = _Cycle(self.deps, device, state, "recovery-release")
                cycle.record.result = "released"
                cycle.record.pods = list(state.pod_uids)
                for name, value in state.verify.model_dump().items():  # the proof of the verify before the crash
                    setattr(cycle.record, name, value)
                if state.reset is not None and state.reset.new_uuid:
                    self._reset_evidence(cycle, state.reset)
                if device.dynamic and self.deps.partitions is not None:
                    # DynamicMIG: what is at the placement now (the transient may be gone already:
                    # killed between its destroy and the state write); a placeholder UUID has no handle.
                    found = self._current(device)
                    if found is None and not device.whole_gpu and not self._mig_enabled(device):
                        found = self._whole_gpu_free(device)  # it was filled as the whole GPU: DEFAULT back
                    cycle.target = found
                    if found is not None and (found.uuid == state.transient_uuid or state.transient_pending):
                        cycle.transient = found
                return self._finish(cycle, self._release(cycle))
        if state.phase is Phase.QUARANTINED:
            clock = self.deps.clock_for(device.name)
            if self.deps.config.quarantine_policy is QuarantinePolicy.TAINT_AND_PROHIBIT and state.ci_guard is None:
                try:  # on the hardware at the device now (a DynamicMIG placement: its real instance)
                    target = self._current(device)
                    if target is not None:
                        self.deps.nvml.set_compute_mode(target, ComputeMode.PROHIBITED)
                except ComputeModeUnsupported:
                    self._reguard_instances(device)
                except BackendError as error:
                    _LOG.warning("%s: cannot set PROHIBITED (re-apply the quarantine guard): %s", device.name, error)
            try:
                self.deps.guard.taint(device.name, "quarantined", clock, state.reason)
            except GuardError as error:
                _LOG.warning("%s: cannot re-apply quarantine taint: %s", device.name, error)
            if not barrier_allowed:
                return None  # the claims are unknown: re-guard only, no barrier (no drain) runs
            if (state.reason or "").startswith(_SELF_CLEARING) and self._no_contexts(device):
                return self.run(device, "zero-contexts")  # sanitize once they are gone (policy, foreign owners)
            if (state.reason or "").startswith(TRANSIENT_VANISHED):
                return self.run(device, "rerun")  # the fill did not count: do it again
            if (state.reason or "").startswith(MIG_UNMANAGEABLE) and (
                    self.deps.mig_access is None or self.deps.mig_access.problem is None):
                return self.run(device, "mig-management-available")
        return None

    def _reguard_instances(self, device: DeviceInfo) -> None:
        """A quarantined MIG slice without compute mode: retry the compute-instance guard."""
        with self.deps.store.lock(device.name):
            state = self.deps.store.load(device.name, device.uuid)
            if state.phase is not Phase.QUARANTINED or state.ci_guard is not None:
                return
            problem = self._close_instances(device, device, state, self.deps.clock_for(device.name))
        if problem is not None:
            _LOG.warning("%s: quarantined: %s", device.name, problem)

    def _has_proof(self, device: DeviceInfo) -> bool:
        """A ``releasing`` state carries the verify figures and the drain's context count (else: DIRTY)."""
        with self.deps.store.lock(device.name):
            state = self.deps.store.load(device.name, device.uuid)
            if state.phase is not Phase.RELEASING or (
                    state.verify is not None and state.verify.contexts_after_drain is not None):
                return True
            state.phase = Phase.DIRTY
            self.deps.store.save(state)
            return False

    def _no_contexts(self, device: DeviceInfo) -> bool:
        """True if NVML lists no process on the device and none holds its nodes (an error: False, keep waiting).

        DynamicMIG: the processes of the instance at the placement now (none there: no context).
        """
        try:
            target = self._current(device)
            if target is None:
                return True
            pids = self.deps.nvml.processes(target)
        except BackendError:
            return False
        if self.deps.device_handles is not None:
            scan = self.deps.device_handles(target)
            if scan.failed:
                return False  # cannot be ruled out: keep waiting
            pids = [*pids, *(h.pid for h in scan.holders)]
        return not [p for p in pids if p not in self.deps.own_pids]

    def prohibit(self, device: DeviceInfo, why: str) -> bool:
        """Compute mode PROHIBITED on the hardware at ``device`` now (a DynamicMIG placement: its real
        instance, never the placeholder UUID). True if set, or if no instance exists (nothing to guard)."""
        try:
            target = self._current(device)
            if target is None:
                return True
            self.deps.nvml.set_compute_mode(target, ComputeMode.PROHIBITED)
            return True
        except BackendError as error:
            _LOG.warning("%s: cannot set PROHIBITED (%s): %s", device.name, why, error)
            return False

    def mark_allocated(self, device: DeviceInfo, tenant: Tenant) -> None:
        """A claim now holds the device: guard it for the moment it is released."""
        with self.deps.store.lock(device.name):
            state = self.deps.store.load(device.name, device.uuid)
            if state.phase not in (Phase.CLEAN, Phase.ALLOCATED, Phase.UNKNOWN):
                # Quarantined or mid-barrier (possible only without taints): the barrier owns it.
                _LOG.warning("%s allocated to %s while %s", device.name, tenant.claim, state.phase.value)
                return
            if state.phase is not Phase.ALLOCATED:  # a new occupancy: nobody before it is kept
                state.claim_uids, state.pod_uids, state.missed_turnover = [], [], None
                state.claim = None
            if not state.claim_uids or tenant.uid not in state.claim_uids:  # the first claim, or a co-holder
                state.claim = tenant.claim if state.claim is None else _joined(state.claim, tenant.claim)
                state.tenant_namespace = tenant.namespace if not state.claim_uids else (
                    state.tenant_namespace if state.tenant_namespace == tenant.namespace else None)
            if not state.claim_uids:
                state.boundary = tenant.boundary
                state.policy = tenant.policy.model_dump(by_alias=True, mode="json") if tenant.policy else None
            if state.phase is not Phase.ALLOCATED:  # the counters the release's health gates compare with
                state.health_baseline = baseline(self.deps.health, device) or state.health_baseline
            state.uuid, state.phase = device.uuid, Phase.ALLOCATED
            _add_holder(state, tenant)
            state.updated = self.deps.clock_for(device.name).wall()
            self.deps.store.save(state)
        try:
            self.deps.guard.taint(device.name, "in-use", self.deps.clock_for(device.name))
        except GuardError as error:
            _LOG.error("%s: cannot place the guard taint while allocated: %s", device.name, error)
        self.lift_local_guard(device)
        if tenant.policy_problem:
            _LOG.error("%s: claim %s: %s", device.name, tenant.claim, tenant.policy_problem)
            self.deps.guard.event(device.name, "PreemptionPolicyInvalid", f"{tenant.claim}: {tenant.policy_problem}",
                                  self.deps.clock_for(device.name))

    def guard_unknown_locally(self, device: DeviceInfo) -> str:
        """API down and no saved state: refuse NEW contexts (compute mode PROHIBITED), signal nobody.

        Existing contexts are not touched (PROHIBITED only stops new ones), so a tenant whose claim
        the agent cannot see keeps running. Returns ``compute-mode`` (set), ``no-instance``
        (DynamicMIG placement without an instance: nothing can hold a context, nothing to set;
        retried), ``compute-instance`` (MIG before CUDA 13.3: its compute instances destroyed instead,
        possible only while no process holds one; recreated, with a new UUID, when lifted), ``failed``
        (NVML refused; logged, retried) or ``known`` (the device has a state).
        """
        with self.deps.store.lock(device.name):
            state = self.deps.store.load(device.name, device.uuid)
            if state.phase is not Phase.UNKNOWN:
                return "known"
            if state.ci_guard is not None:
                return "compute-instance"  # destroyed already (an earlier tick)
            try:
                target = self._current(device)
            except BackendError as error:
                _LOG.error("%s: cannot look up its instance while the API is unknown: %s", device.name, error)
                return "failed"
            if target is None:
                return "no-instance"
            state.uuid, state.local_guard = device.uuid, True  # the intent first: a lift restores DEFAULT
            state.updated = self.deps.clock_for(device.name).wall()
            self.deps.store.save(state)
            try:
                self.deps.nvml.set_compute_mode(target, ComputeMode.PROHIBITED)
            except ComputeModeUnsupported:  # MIG before CUDA 13.3: no compute instance, no new context
                problem = self._close_instances(device, target, state, self.deps.clock_for(device.name))
                if problem is not None:
                    _LOG.error("%s: never sanitized, claims unknown: %s", device.name, problem)
                    return "failed"
                return "compute-instance"
            except BackendError as error:
                _LOG.error("%s: never sanitized, claims unknown, and compute mode PROHIBITED failed: nothing "
                           "keeps a new context off it (%s); retrying", device.name, error)
                return "failed"
        _LOG.error("%s: never sanitized (no saved state) and the claims are unknown: compute mode PROHIBITED "
                   "(no new context; running ones untouched, nobody killed) until the API answers", device.name)
        return "compute-mode"

    def lift_local_guard(self, device: DeviceInfo) -> bool:
        """A live claim holds a device guarded while the API was down: its tenant may create contexts again.

        Called after the ``in-use`` taint is placed. True if the compute mode is back to DEFAULT
        (or there was nothing to lift); False if NVML refused (kept PROHIBITED: costs the tenant
        new contexts, exposes nothing; retried by the agent's tick).
        """
        with self.deps.store.lock(device.name):
            state = self.deps.store.load(device.name, device.uuid)
            if not state.local_guard:
                return True
            if state.phase is not Phase.ALLOCATED:
                return False  # not known to be held: the guard stays (a barrier takes it over)
            try:
                if state.ci_guard is not None:
                    self._reopen(device, state, self.deps.clock_for(device.name))
                else:
                    self._restore_default(device)
            except BackendError as error:
                _LOG.error("%s: held by %s, but restoring compute mode DEFAULT failed (retried): %s",
                           device.name, state.claim, error)
                return False
            state.local_guard = False
            self.deps.store.save(state)
        _LOG.warning("%s: held by %s: the compute-mode guard set while the API was down is lifted (the in-use "
                     "taint guards it; sanitized when released)", device.name, state.claim)
        return True

    def _restore_default(self, device: DeviceInfo) -> None:
        """Compute mode DEFAULT on the hardware at ``device`` now (none there: nothing to restore;
        MIG before CUDA 13.3: it is DEFAULT all along). Other NVML errors raise."""
        target = self._current(device)
        if target is not None:
            with contextlib.suppress(ComputeModeUnsupported):
                self.deps.nvml.set_compute_mode(target, ComputeMode.DEFAULT)

    def _current(self, device: DeviceInfo) -> DeviceInfo | None:
        """The hardware to set a compute mode on: the device, or a DynamicMIG placement's instance (or None).

        DynamicMIG's whole GPU ``gpu-N`` with MIG mode off is the GPU itself (see :meth:`_instance`).
        """
        if device.dynamic and self.deps.partitions is not None:
            return self.deps.partitions.instance(device)
        return device

    def tenant_leaving(self, device: DeviceInfo) -> None:
        """The last pod using the device is terminating: without taints, refuse new contexts now.

        Recorded (``leaving_guard``) so :meth:`tenant_back` lifts it if a running pod holds the
        claim again before it is released (a no-surge rollout on a shared claim).
        """
        if self.deps.guard.has_taints:
            return
        with self.deps.store.lock(device.name):
            state = self.deps.store.load(device.name, device.uuid)
            if state.phase is not Phase.ALLOCATED or state.leaving_guard:
                return  # mid-barrier or quarantined: the barrier owns the compute mode
            state.leaving_guard = True  # the intent first: tenant_back restores DEFAULT
            self.deps.store.save(state)
            if not self.prohibit(device, "tenant leaving"):  # a DynamicMIG placement: its real instance
                _LOG.error("%s: no taint API and compute mode PROHIBITED failed", device.name)

    def tenant_back(self, device: DeviceInfo) -> bool:
        """A running pod holds the claim again: lift the :meth:`tenant_leaving` guard (DEFAULT).

        True if lifted or nothing to lift; False if NVML refused (kept, retried on the next change).
        """
        with self.deps.store.lock(device.name):
            state = self.deps.store.load(device.name, device.uuid)
            if not state.leaving_guard or state.phase is not Phase.ALLOCATED:
                return True
            try:
                self._restore_default(device)
            except BackendError as error:
                _LOG.error("%s: a running pod holds %s again, but compute mode DEFAULT failed: %s",
                           device.name, state.claim, error)
                return False
            state.leaving_guard = False
            self.deps.store.save(state)
        _LOG.warning("%s: a running pod holds %s again: compute mode DEFAULT (its pods may create contexts)",
                     device.name, state.claim)
        return True

    def operator_release(self, device: DeviceInfo, reason: str, operator: str) -> EvidenceRecord:
        """An operator releases a quarantined device: logged, then a full barrier must pass.

        It runs with the agent's (the administrator's) settings, not the old tenant's claim policy
        (which may be what failed, e.g. a reset this node cannot do).
        """
        with self.deps.store.lock(device.name):
            state = self.deps.store.load(device.name, device.uuid)
            if state.policy is not None or (state.reset is not None and state.reset.new_uuid):
                state.policy = None
                # A finished reset's carried counters were judged by the quarantine the operator now
                # lifts: the release's gates count from the post-reset baseline (a reset now re-reads).
                state.reset = state.reset if state.reset is not None and not state.reset.new_uuid else None
                self.deps.store.save(state)
        clock = self.deps.clock_for(device.name)
        note = EvidenceRecord(
            kind="operator-release", node=self.deps.config.node_name, device=device.name, uuid=device.uuid,
            cycle=state.cycle, trigger="operator", started_at=clock.wall(), result="operator-release",
            reason=f"{reason} (was: {state.phase.value}: {state.reason})", operator=operator,
            attestation=attest(self.deps.health, device, self.deps.scrub_on_free_disabled),
        )
        self.deps.evidence.write(note)
        _LOG.warning("operator %s releases %s: %s", operator, device.name, reason)
        return self.run(device, f"operator-release: {reason}")

    # --- the cycle --------------------------------------------------------------------------

    def _cycle(self, c: _Cycle) -> EvidenceRecord:
        session: ScrubSession | None = None
        try:
            if self.deps.config.require_scrub_on_free and self.deps.scrub_on_free_disabled:
                raise BarrierFailure("the driver's scrub-on-free is disabled (RMDisableScrubOnFree) and "
                                     "require_scrub_on_free is set")
            c.enter(Phase.GUARD)
            self._health_baseline(c)
            c.target = self._instance(c)
            self._guard(c)
            c.enter(Phase.DRAIN)
            if c.target is not None:
                self._drain(c)
            c.enter(Phase.VERIFY_CONTEXTS)
            if c.target is not None:
                self._verify_no_contexts(c, allowed=set(), what=_AFTER_DRAIN)
            else:
                c.record.contexts_after_drain = 0  # no instance at the placement: nobody can hold one
            if c.state.ci_guard is not None:
                self._reopen_instances(c)  # destroyed as the guard: recreated for the fill
            reset = self._reset_type(c)
            if reset is not None:
                self._reset(c, reset)
            if c.target is None:
                self._create_transient(c)
            c.enter(Phase.FILL)
            c.set_mode(ComputeMode.EXCLUSIVE_PROCESS)  # our context will be the only one
            assert c.target is not None
            self._check_unaccounted_memory(c)
            session = self.deps.scrubber.open(c.target, self.deps.config.fill_timeout_s)
            c.crash("fill-opened")
            # Re-checked right before the fill: nobody but our own worker holds a context.
            self._verify_no_contexts(c, allowed={session.pid}, what="right before the fill")
            fill = session.fill()
            c.record.bytes_total, c.record.bytes_free = fill.bytes_total, fill.bytes_free
            c.record.bytes_zeroed = fill.bytes_zeroed
            fill_seconds = fill.memset_seconds if fill.memset_seconds is not None else fill.seconds
            if fill_seconds > 0:  # the memset alone: allocation time is not fill bandwidth
                c.record.fill_bytes_per_s = fill.bytes_zeroed / fill_seconds
            if c.record.bytes_free_before_context is not None:
                c.record.bytes_context = max(0, c.record.bytes_free_before_context - fill.bytes_free)
            c.crash("filled")
            c.enter(Phase.VERIFY)
            result = session.verify()
            self._record_verify(c, fill.bytes_free, fill.bytes_total, result)
            c.crash("verified")
            self._check_verify(c, fill.bytes_zeroed, result)
            c.set_mode(ComputeMode.PROHIBITED)  # nobody slips in between our close and the release
            session.close()
            session = None
            self._verify_no_contexts(c, allowed=set(), what="after the verify")
            self._health(c)
            c.state.verified_cycle = c.state.cycle
            # The proof travels with the releasing state: a release finished after a crash carries it.
            c.state.verify = VerifyFigures(**{k: getattr(c.record, k) for k in VerifyFigures.model_fields})
            c.enter(Phase.RELEASING)
            c.record.result = "released"
            return self._finish(c, self._release(c))
        except _Deferred as deferred:
            return self._defer(c, str(deferred), session)
        except (BarrierFailure, BackendError, GuardError) as error:
            return self._quarantine(c, self._vanished(c, str(error)), session)
        except Exception as error:  # a bug must not release a device: fail closed
            _LOG.exception("%s: internal error in the barrier", c.device.name)
            return self._quarantine(c, f"internal error: {type(error).__name__}: {error}", session)
        finally:
            if session is not None:
                session.close()

    # --- health gates (agent/health.py) ------------------------------------------------------

    def _health_baseline(self, c: _Cycle) -> None:
        """No counters from the allocation or the last release: count from the barrier's start."""
        if self.deps.health is None or not self.deps.config.health_gates or c.state.health_baseline is not None:
            return
        c.state.health_baseline = baseline(self.deps.health, c.device)
        c.record.warnings.append("health baseline taken at the barrier's start (the allocation was not seen): "
                                 "errors during the claim before it are not counted")

    def _health_on(self) -> bool:
        return self.deps.health is not None and self.deps.config.health_gates

    def _health(self, c: _Cycle) -> None:
        """Verified clean: every health gate must pass too, or the device is quarantined with the gates' reasons."""
        if not self.deps.config.health_gates:
            return
        if self.deps.health is None:
            c.record.warnings.append("health gates not run: this backend serves no health reads")
            return
        # A cold reset in this release (this cycle, or one the agent died after: its record stays
        # until the release or an operator's release): the baseline was re-read after it.
        reset = c.state.reset if c.reset_done or c.state.reset is not None else None
        carried = reset.health_carried if reset is not None and reset.health_rebased else None  # else: fail closed
        report = check(self.deps.health, c.target or c.device, c.state.health_baseline, self.deps.config.require_ecc,
                       carried=carried, reset=reset is not None)
        c.record.health = report.gates
        c.record.warnings.extend(report.warnings)
        if report.failures:
            raise BarrierFailure(f"health gate {'; '.join(report.failures)}")
        c.state.health_baseline = report.counters or c.state.health_baseline  # the next claim's baseline

    # --- partitions: DynamicMIG and cold reset ----------------------------------------------

    def _instance(self, c: _Cycle) -> DeviceInfo | None:
        """The hardware at the device now: itself, its current MIG instance, or None (no instance).

        DynamicMIG: an instance the agent made (``transient_uuid``, or any found while
        ``transient_pending`` says a create was under way when a crash cut it off) is its own
        transient, destroyed at the release; its own GPU instance without a compute instance (a
        create cut off half-way) is destroyed now. MIG mode off on the GPU (Hopper+: the driver
        turns it off when its last instance goes): see :meth:`_mig_off_target`.
        """
        parts = self.deps.partitions
        if parts is None or not (c.device.dynamic or (c.device.is_mig and c.resuming_reset)):
            return c.device  # static devices: no extra NVML calls unless a reset was cut off
        if c.device.dynamic and not self._mig_enabled(c.device):
            return self._mig_off_target(c)
        found = parts.instance(c.device)
        ours = c.state.transient_uuid == (found.uuid if found else None) or c.state.transient_pending
        if found is not None and (ours if c.device.dynamic else c.state.transient_uuid == found.uuid):
            c.transient = found  # ours, from a cycle cut off by a crash: destroyed at the release
        if found is None and c.device.dynamic and self._half_made(c.device):
            if not c.state.transient_pending:
                raise BarrierFailure("a GPU instance without a compute instance is at the placement and the agent "
                                     "did not create it (the DRA driver preparing a claim?): not touched")
            c.record.warnings.append("destroyed the agent's own GPU instance left without a compute instance")
            parts.destroy(c.device)
            c.state.transient_pending = False
            self.deps.store.save(c.state)
        if found is not None and not c.device.dynamic and found.uuid != c.device.uuid:
            self._rekey(c, found)  # recreated (a reset finished before a crash)
        return found

    def _mig_enabled(self, device: DeviceInfo) -> bool:
        check = getattr(self.deps.partitions, "mig_enabled", None)
        return True if check is None else bool(check(device))

    def _half_made(self, device: DeviceInfo) -> bool:
        """A GPU instance at the placement that has no compute instance (no MIG device handle)."""
        check = getattr(self.deps.partitions, "gpu_instance_exists", None)
        return False if check is None else bool(check(device))

    def _mig_off_target(self, c: _Cycle) -> DeviceInfo:
        """MIG mode is off: the GPU is one device; the placement's memory is the whole GPU's.

        ``gpu-N`` itself: the GPU. A placement: the whole GPU is filled (it holds the placement's
        slices), unless a claim holds ``gpu-N``: then its tenant owns that memory now, nothing is
        filled or killed, and the placement is quarantined (the whole GPU's own barrier covers it).
        """
        if c.device.whole_gpu:
            return c.device
        whole = self._whole_gpu(c.device)
        if whole is None:
            raise BarrierFailure("MIG mode is off on the GPU and the agent knows no whole-GPU device to fill")
        held = self.deps.store.load(whole.name, whole.uuid)
        if held.phase is Phase.ALLOCATED:
            raise BarrierFailure(f"MIG mode is off and the whole GPU {whole.name} is held by claim {held.claim}: "
                                 "the placement's memory is that tenant's now; nothing filled, nobody killed")
        c.record.warnings.append(f"MIG mode off: the whole GPU {whole.name} is filled for this placement")
        return whole

    def _whole_gpu(self, device: DeviceInfo) -> DeviceInfo | None:
        return next((d for d in self.deps.inventory.values() if d.whole_gpu and d.gpu_uuid == device.gpu_uuid), None)

    def _whole_gpu_free(self, device: DeviceInfo) -> DeviceInfo | None:
        """The whole GPU of ``device`` if no claim holds it (None otherwise, or if there is none)."""
        whole = self._whole_gpu(device)
        if whole is None or self.deps.store.load(whole.name, whole.uuid).phase is Phase.ALLOCATED:
            return None
        return whole

    def _create_transient(self, c: _Cycle) -> None:
        """No instance at the placement: create one to fill (DynamicMIG), or recreate a lost static one.

        DynamicMIG: the intent is saved durably before the create (``transient_pending``), the
        UUID right after it, before anything else can fail or be killed; a create that fails
        looks again: an instance the DRA driver created meanwhile (the next claim's prepare) is
        the quarantine's target, so the guard lands on it; NO_PERMISSION defers (see
        :mod:`.migaccess`).
        """
        parts = self.deps.partitions
        if parts is None:
            raise BarrierFailure("no MIG instance at the placement and no partition backend to create one")
        if c.device.dynamic:
            access = self.deps.mig_access
            if access is not None and access.problem is not None:
                raise _Deferred(f"{MIG_UNMANAGEABLE}: {access.problem}")
            c.state.transient_pending = True
            self.deps.store.save(c.state)
            c.crash("transient-intent")
        try:
            created = parts.create(c.device)
        except BackendError as error:
            if c.device.dynamic:
                self._create_failed(c, error)
            raise
        c.target = created
        if c.device.dynamic:
            c.transient = created
            c.record.transient_instance = created.uuid
            c.state.transient_uuid, c.state.transient_pending = created.uuid, False
            self.deps.store.save(c.state)
        else:
            self._rekey(c, created)
        c.set_mode(ComputeMode.PROHIBITED)  # a new instance starts in DEFAULT
        c.crash("transient-created")

    def _create_failed(self, c: _Cycle, error: BackendError) -> None:
        """The transient create failed: what is at the placement now decides the quarantine's target."""
        parts = self.deps.partitions
        assert parts is not None
        # Our own GI exists only if its create passed (the CI create failed, and so did the cleanup).
        own_gi = error.op != _GI_CREATE
        if "NO_PERMISSION" in str(error).upper().replace(" ", "_") or "Insufficient Permissions" in str(error):
            c.state.transient_pending = own_gi and self._half_made(c.device)
            self.deps.store.save(c.state)
            if self.deps.mig_access is not None:
                self.deps.mig_access.refused(f"NVML refused to create a GPU instance ({error})")
                raise _Deferred(f"{MIG_UNMANAGEABLE}: NVML refused to create a GPU instance ({error})") from error
            return
        found = parts.instance(c.device)
        c.state.transient_pending = own_gi and found is None and self._half_made(c.device)  # destroyed next time
        self.deps.store.save(c.state)
        if found is not None:
            c.target = found  # the quarantine guards it (PROHIBITED on its real UUID)
            raise BarrierFailure(
                f"an instance appeared at the placement during the barrier ({found.uuid}: the DRA driver prepared "
                f"the next claim) before the fill; its memory was never sanitized: guarded, nothing killed "
                f"({error})") from error

    def _vanished(self, c: _Cycle, reason: str) -> str:
        """A failure: did the transient vanish (kubelet plugin restart)? DynamicMIG: guard what is there now.

        Without a transient, an instance found at the placement (the DRA driver prepared the next
        claim meanwhile) becomes the quarantine's target, so its guard lands on the real UUID.
        """
        parts = self.deps.partitions
        if not c.device.dynamic or parts is None:
            return reason
        if c.transient is None:
            with contextlib.suppress(BackendError):
                found = parts.instance(c.device) if self._mig_enabled(c.device) else None
                if found is not None:
                    c.target = found
            return reason
        try:
            found = parts.instance(c.device)
        except BackendError:
            return reason
        if found is not None and found.uuid == c.transient.uuid:
            return reason
        gone = c.transient.uuid
        c.transient, c.target = None, found  # not ours any more; whatever is there now gets the guard
        c.state.transient_uuid, c.state.transient_pending = None, False
        return (f"{TRANSIENT_VANISHED} ({gone}; the GPU kubelet plugin destroys instances it did not create "
                f"when it starts): the fill does not count, the barrier runs again ({reason})")

    # --- the compute-instance guard: static MIG where compute mode cannot be set ----------------

    def _close_instances(self, device: DeviceInfo, target: DeviceInfo, state: DeviceState, clock: Clock) -> str | None:
        """Destroy the slice's compute instances so no context can be created on it; None, or why not.

        Only where no listed process holds a context (NVML would answer IN_USE, and those are the
        processes the drain is for). The intent is saved first, then the layout that was destroyed.
        """
        ci = self.deps.ci_guard
        if ci is None or not target.is_mig or device.dynamic:
            return (f"{device.name}: compute mode cannot be set and this backend has no compute-instance guard: "
                    f"only the taint keeps new contexts off it")
        try:
            pids = [p for p in self.deps.nvml.processes(target) if p not in self.deps.own_pids]
        except BackendError as error:
            return f"compute-instance guard of {device.name}: cannot list its processes ({error}); retried"
        if pids:
            return (f"compute-instance guard of {device.name}: pids {', '.join(map(str, pids))} hold contexts, so "
                    f"its compute instances cannot be destroyed (IN_USE): not guarded locally, the taint guards "
                    f"it; retried")
        state.ci_guard = CiGuardRecord(device=dataclasses.asdict(device), closed_at=clock.wall())
        self.deps.store.save(state)
        try:
            layout = ci.close(target)
        except BackendError as error:
            if self._instances_intact(device, target):
                state.ci_guard = None
            self.deps.store.save(state)
            return (f"compute-instance guard of {device.name}: {error}: not guarded locally (a process NVML does "
                    f"not list may hold a context); the taint guards it; retried")
        state.ci_guard.layout = layout
        self.deps.store.save(state)
        _LOG.warning("%s: compute mode cannot be set (MIG, NVML before CUDA 13.3): its compute instances are "
                     "destroyed so no context can be created on it until the barrier recreates them", device.name)
        return None

    def _instances_intact(self, device: DeviceInfo, target: DeviceInfo) -> bool:
        """True if every compute instance of ``target`` still exists (a refused destroy destroyed none)."""
        if self.deps.partitions is None:
            return False
        try:
            found = self.deps.partitions.instance(device)
        except BackendError:
            return False  # unsure: keep the record, the reopen creates only what is missing
        before = set(target.compute_instance_uuids or (target.uuid,))
        return found is not None and set(found.compute_instance_uuids or (found.uuid,)) == before

    def _reopen(self, device: DeviceInfo, state: DeviceState, clock: Clock) -> DeviceInfo:
        """Recreate the compute instances destroyed as the guard; state and inventory follow the new UUID."""
        ci, record = self.deps.ci_guard, state.ci_guard
        assert record is not None
        if ci is None:
            raise BarrierFailure(f"{device.name}: its compute instances were destroyed as the guard and this "
                                 f"backend cannot recreate them")
        new = ci.reopen(device, record.layout)
        state.ci_guard = None
        state.uuid = new.uuid
        self.deps.inventory[new.name] = new
        self.deps.store.save(state)
        self.deps.guard.event(device.name, "ComputeInstancesRecreated",
                              f"compute instances destroyed as the guard are recreated: {device.uuid} -> {new.uuid}; "
                              f"the DRA driver publishes MIG UUIDs: restart its kubelet plugin so it re-enumerates",
                              clock, warning=False)
        return new

    def _reopen_instances(self, c: _Cycle) -> None:
        """In a cycle: recreate the destroyed compute instances; the fill runs on them."""
        old = c.device.uuid
        new = self._reopen(c.device, c.state, c.clock)
        c.target = new
        c.record.compute_instances_recreated = [old, new.uuid]
        self._rekey(c, new)

    def _scrub_unguarded(self, c: _Cycle) -> None:
        """Quarantined and nothing keeps a new context off it (no taint, no compute mode, instances in use).

        Zero, best effort, what a new context could allocate, so it cannot read what the previous
        tenant left there; not verified, not a release. Only if no fill ran in this cycle and NVML
        lists no process (a live tenant's memory is never taken from it).
        """
        if c.target is None or c.record.bytes_zeroed or (c.state.reason or "").startswith(AWAITING_ZERO_CONTEXTS):
            return
        try:
            if [p for p in self.deps.nvml.processes(c.target) if p not in self.deps.own_pids]:
                return
            session = self.deps.scrubber.open(c.target, self.deps.config.fill_timeout_s)
            try:
                fill = session.fill()
            finally:
                session.close()
        except BackendError as error:
            c.record.warnings.append(f"no guard holds this quarantined device; the best-effort fill failed: {error}")
            return
        c.record.warnings.append(
            f"no guard holds this quarantined device (no taint, no compute mode, compute instances in use): "
            f"{fill.bytes_zeroed} bytes a new context could allocate were zeroed (best effort, not verified)")

    def _reset_type(self, c: _Cycle) -> str | None:
        """The cold reset this release needs (config or the claim's policy), or None.

        The node's ``partition_reset`` is the administrator's: done at every tenant release (and
        fails closed where the pod cannot). A claim's ``coldResetOnRelease`` is done only where
        the node can perform it (:mod:`.backends.capability`); elsewhere the barrier runs without
        it and the evidence and an Event say so.
        """
        mode = self.deps.config.partition_reset
        requested = c.policy is not None and c.policy.cold_reset_on_release
        if mode is PartitionReset.OFF and not requested:
            return None
        if c.state.claim is None and not c.resuming_reset:
            return None  # no tenant released it (startup, operator): nothing crossed a boundary
        if c.device.dynamic:
            return None  # the instance is destroyed at unprepare; the transient one is fresh anyway
        kind = (PartitionReset.MIG_INSTANCE.value if c.device.is_mig or c.device.placement is not None
                else PartitionReset.GPU.value)
        if mode is PartitionReset.OFF and not c.resuming_reset:
            check = self.deps.reset_unavailable
            problem = check(kind) if check is not None else None
            if problem is not None:
                note = f"the claim asks for a cold reset ({kind}) this node cannot perform: {problem}; done without it"
                c.record.warnings.append(note)
                self.deps.guard.event(c.device.name, "ColdResetUnavailable", f"{c.state.claim}: {note}", c.clock)
                return None
        return kind

    def _reset(self, c: _Cycle, kind: str) -> None:
        """Cold reset: destroy and recreate the MIG instance at its placement, or reset the GPU."""
        parts = self.deps.partitions
        if parts is None:
            raise BarrierFailure(f"partition reset {kind} requested but this backend cannot reset")
        old = c.target
        previous = c.state.reset if c.resuming_reset else None  # a reset cut off before: keep its old UUID
        # A reset this release already finished (the agent died after it): the baseline was re-read
        # after it, so what the claim gained before it is only in that record; added, never dropped.
        earlier = c.state.reset if previous is None and c.state.reset is not None else None
        old_uuid = old.uuid if old else (previous.old_uuid if previous else "")
        c.state.reset = ResetRecord(reset_type=kind, old_uuid=old_uuid, started=c.clock.wall(),
                                    device=dataclasses.asdict(c.device))
        if previous is not None:  # what the claim gained before the first try (a retry's read is post-reset)
            c.state.reset.health_carried = previous.health_carried
        elif self._health_on():  # the reset zeroes the volatile counters: what the claim gained, now
            gained = carried_since(self.deps.health, old or c.device, c.state.health_baseline)
            if earlier is not None:
                before = earlier.health_carried if earlier.health_rebased else None
                gained = None if gained is None or before is None else {
                    name: value + before.get(name, 0) for name, value in gained.items()}
            c.state.reset.health_carried = gained
        c.enter(Phase.RESETTING)
        start = c.clock.monotonic()
        if kind == PartitionReset.MIG_INSTANCE.value:
            if old is not None:
                parts.destroy(old)
            c.target = None
            c.crash("reset-destroyed")
            new = parts.create(c.device)
            c.crash("reset-created")
        else:
            assert old is not None
            new = parts.reset_gpu(old, self.deps.config.reset_timeout_s)
        c.target = new
        c.set_mode(ComputeMode.PROHIBITED)  # a new instance (or a reset GPU) starts in DEFAULT
        seconds = c.clock.monotonic() - start
        if self._health_on():  # the counters the gates compare with: re-read after the reset
            c.state.health_baseline = baseline(self.deps.health, new)
            c.state.reset.health_rebased = True
        c.state.reset.new_uuid, c.state.reset.seconds = new.uuid, round(seconds, 6)
        c.reset_done = True
        self._rekey(c, new)
        self._reset_evidence(c, c.state.reset)
        if seconds > self.deps.config.reset_timeout_s:
            raise BarrierFailure(f"{kind} reset took {seconds:.1f}s, more than reset_timeout_s "
                                 f"{self.deps.config.reset_timeout_s:g}")
        self.deps.guard.event(c.device.name, "PartitionReset", f"{kind} reset: {c.state.reset.old_uuid} -> "
                              f"{new.uuid}; the DRA driver must re-enumerate in static-MIG mode", c.clock,
                              warning=False)

    @staticmethod
    def _reset_evidence(c: _Cycle, reset: ResetRecord) -> None:
        c.record.reset_type, c.record.reset_old_uuid = reset.reset_type, reset.old_uuid
        c.record.reset_new_uuid, c.record.reset_seconds = reset.new_uuid, reset.seconds

    def _rekey(self, c: _Cycle, new: DeviceInfo) -> None:
        """The device has a new UUID: state, evidence and the inventory follow it."""
        if c.device.dynamic:
            return
        c.device = new
        c.state.uuid = new.uuid
        c.record.uuid = new.uuid
        self.deps.inventory[new.name] = new
        self.deps.store.save(c.state)

    def _check_unaccounted_memory(self, c: _Cycle) -> None:
        """Before our context: free must be total - reserved, less at most ``unaccounted_memory_bytes``.

        Memory that no listed process holds (a process in another PID namespace, a leaked
        allocation) is invisible to the process list and to the fill; it is exactly what the
        next tenant could read, so it fails the barrier. The allowance is absolute: half an
        allocation granule (1 MiB of CUDA's 2 MiB), so any allocation a hidden process holds exceeds it.
        """
        try:
            assert c.target is not None
            memory = self.deps.nvml.memory(c.target)
        except BackendError as error:
            if error.fatal:
                raise
            raise BarrierFailure(f"cannot read the device's memory before the fill: {error}") from error
        missing = memory_figures(c.record, memory)
        allowed = self.deps.config.unaccounted_allowance
        if missing > allowed:
            raise BarrierFailure(
                f"unaccounted memory: {missing} bytes of the device are in use although no process holds a "
                f"context (free {memory.free} of {memory.total}, driver-reserved {memory.reserved}, allowed "
                f"{allowed}: unaccounted_memory_bytes); a process NVML does not list (another PID namespace?) "
                f"holds memory the fill cannot reach")

    def _record_verify(self, c: _Cycle, bytes_free: int, bytes_total: int, result: VerifyResult) -> None:
        record_verify(c.record, bytes_free, bytes_total, result)

    def _check_verify(self, c: _Cycle, bytes_zeroed: int, result: VerifyResult) -> None:
        check_verify(c.record, bytes_zeroed, result, self.deps.config.coverage_threshold)

    def _guard(self, c: _Cycle) -> None:
        if c.state.ci_guard is not None and self.deps.partitions is not None:
            found = self.deps.partitions.instance(c.device)
            if found is None:  # no compute instance (our guard): nothing can hold a context until the fill
                c.target = None
                c.record.compute_instance_guard = True
            else:  # recreated already (cut off before the state said so): drained like any instance
                c.state.ci_guard = None
                c.target = found
                if found.uuid != c.device.uuid:
                    c.record.compute_instances_recreated = [c.device.uuid, found.uuid]
                    self._rekey(c, found)
        c.record.compute_mode_guard = c.set_mode(ComputeMode.PROHIBITED)
        try:
            tainted = self.deps.guard.taint(c.device.name, "sanitizing", c.clock)
        except GuardError as error:
            # Sanitizing is still the best thing to do; the evidence says the taint is missing.
            c.record.warnings.append(f"guard taint: {error}")
            tainted = False
        if not tainted:
            c.record.taint = f"missing: {self.deps.guard.describe(c.device.name)}"
        c.record.guarded_overlaps = self.deps.guard.overlaps(c.device.name)

    def _processes(self, c: _Cycle) -> list[int] | None:
        """NVML's process list; None on a transient error (a fatal one raises)."""
        assert c.target is not None
        try:
            return self.deps.nvml.processes(c.target)
        except BackendError as error:
            if error.fatal:
                raise
            c.record.warnings.append(str(error))
            return None

    def _drain(self, c: _Cycle) -> None:
        cfg = self.deps.config
        grace, timeout = cfg.grace_period_s, cfg.drain_timeout_s
        kill = True
        if c.policy is not None:  # the claim's own policy (guideline rule 4): it may only shorten
            if c.policy.grace_period_seconds is not None:
                grace = min(grace, c.policy.grace_period_seconds)
            kill = c.policy.on_contexts_remaining is ContextsRemaining.KILL
        start = c.clock.monotonic()
        killed = False
        termed: set[int] = set()
        owned = frozenset(c.state.pod_uids)
        while True:
            now = c.clock.monotonic()
            pids = self._processes(c)
            if pids is not None:
                pids = [p for p in self._with_holders(c, pids) if p not in self.deps.own_pids]
                mine = [p for p in pids if self._owned(c, p, owned)]
                others = [p for p in pids if p not in mine]
                self._foreign(c, others, owned)
                if not mine:
                    if others:
                        self._foreign_failure(c)
                    return
                # Pinned first, then the owner read again: a PID reused in between is not the one read.
                pids = [p for p in self._pinned(c, mine) if self._owned(c, p, owned)]
                if kill and not killed and now - start >= grace:
                    killed = True
                    c.crash("drain-killed")
                if killed:
                    for pid in pids:  # recorded once sent: a refused signal raises and is not evidence
                        self.deps.signaller.signal(pid, signal.SIGKILL)
                        if pid not in c.record.pids_sigkill:
                            c.record.pids_sigkill.append(pid)
                else:
                    for pid in pids:
                        if pid not in termed:
                            termed.add(pid)
                            self.deps.signaller.signal(pid, signal.SIGTERM)
                            c.record.pids_sigterm.append(pid)
                    c.crash("drain-signalled")
            if now - start >= timeout:
                still = "unknown (NVML failing)" if pids is None else ", ".join(map(str, pids))
                if c.record.foreign_processes:
                    still += f"; and foreign contexts, never signalled: {self._foreign_text(c)}"
                if not kill:
                    raise BarrierFailure(f"{AWAITING_ZERO_CONTEXTS} (claim policy onContextsRemaining: "
                                         f"Quarantine; no SIGKILL): pids {still} after {timeout:g}s")
                raise BarrierFailure(f"drain timeout after {timeout:g}s: contexts still held by "
                                     f"pids {still}")
            c.clock.sleep(cfg.poll_interval_s)

    def _with_holders(self, c: _Cycle, pids: list[int]) -> list[int]:
        """NVML's pids plus every process holding the device's nodes (one ``/proc/*/fd`` scan)."""
        c.nvml_pids.update(pids)
        if self.deps.device_handles is None or c.target is None:
            return pids
        scan = self.deps.device_handles(c.target)
        c.record.device_handle_scan = scan.summary()
        self._scan_problem(c, scan)
        c.holders.update({h.pid: h for h in scan.holders})
        return pids + [h.pid for h in scan.holders if h.pid not in pids]

    def _scan_problem(self, c: _Cycle, scan: HandleScan) -> None:
        """A scan that could not run: Warning Event, metric, and the release is refused (fail closed).

        A partial one (a MIG device's capability nodes not all mapped): Warning Event, metric and a
        warning, once per cycle; the holders of what was mapped still count.
        """
        if scan.problem is None:
            return
        outcome = "failed" if scan.failed else "partial"
        note = f"device handle scan {outcome}: {scan.problem}"
        if note not in c.record.warnings:
            c.record.warnings.append(note)
            if self.deps.metrics is not None:
                self.deps.metrics.handle_scan_problems.labels(outcome).inc()
            what = ("processes holding the device's nodes cannot be ruled out: the release is refused" if scan.failed
                    else "holders of the unmapped nodes are not seen (NVML still lists their contexts)")
            self.deps.guard.event(c.device.name, "DeviceHandleScanFailed", f"{note}; {what}", c.clock)
        if scan.failed:
            raise BarrierFailure(f"{HANDLE_SCAN_FAILED}: {scan.problem}; processes holding the device's nodes "
                                 f"cannot be ruled out (retried until a scan runs)")

    def _owned(self, c: _Cycle, pid: int, owned: frozenset[str]) -> bool:
        """True if ``pid`` runs in a pod of the released claims (the only processes ever signalled).

        The pod (named by the process's own cgroup, :mod:`.owners`) must be in the claims'
        ``status.reservedFor`` *and* pass :attr:`BarrierDeps.pod_check` (the agent's pod list says
        it uses the claim, or knows no such pod: see docs/threat-model.md).
        """
        owner = self.deps.owners(pid)
        return owner.kind == "pod" and owner.pod_uid in owned and self._untrusted(c, owner.pod_uid) is None

    def _untrusted(self, c: _Cycle, pod_uid: str | None) -> str | None:
        """Why a reservedFor pod UID is not trusted for signalling (None: it is); said once per pod in the record."""
        if pod_uid is None:
            return "no pod"
        problem = self.deps.pod_check(pod_uid, c.state.claim)
        note = f"reservedFor pod {pod_uid} not trusted: {problem}"
        if problem is not None and note not in c.record.warnings:
            c.record.warnings.append(note)
        return problem

    def _foreign(self, c: _Cycle, pids: list[int], owned: frozenset[str]) -> None:
        """Record processes the released claims do not own (once per pid): reported, never signalled."""
        seen = {p.get("pid") for p in c.record.foreign_processes}
        for pid in pids:
            if pid in seen:
                continue
            owner = self.deps.owners(pid)
            if owner.kind == "pod" and owner.pod_uid in owned and self._untrusted(c, owner.pod_uid) is None:
                continue  # it became ours between the two reads: the next poll signals it
            holder = c.holders.get(pid)
            c.record.foreign_processes.append({
                "pid": pid, "owner_kind": owner.kind, "pod_uid": owner.pod_uid, "container": owner.container,
                "owner": owner.describe(self.deps.pod_name), "nvml_listed": pid in c.nvml_pids,
                "device_nodes": list(holder.paths) if holder else [], "comm": holder.comm if holder else None,
                "mps": holder.mps if holder else None})

    @staticmethod
    def _foreign_text(c: _Cycle) -> str:
        return ", ".join(f"pid {p['pid']} ({p['owner']})" + ("" if p.get("nvml_listed", True) else
                         f" holding {', '.join(p['device_nodes'])}") for p in c.record.foreign_processes)

    def _foreign_failure(self, c: _Cycle) -> None:
        """Foreign contexts outlive the released claims' processes: Event, then keep the guard (quarantine)."""
        who = self._foreign_text(c)
        message = (f"{len(c.record.foreign_processes)} process(es) the released claim(s) "
                   f"{c.state.claim or '(none)'} did not own hold a context or the device's nodes: {who}; never "
                   f"signalled, the device stays guarded and is sanitized once they are gone")
        self.deps.guard.event(c.device.name, "ForeignContexts", message, c.clock)
        raise BarrierFailure(f"{FOREIGN_CONTEXTS}: {who}; never signalled (not the released claim's)")

    def _pinned(self, c: _Cycle, pids: list[int]) -> list[int]:
        """The listed pids that are safe to signal: pinned by a pidfd, then seen in a fresh listing.

        A PID can be reused between NVML's listing and the first signal; a pidfd opened after
        that would point at the PID's next owner. So each newly pinned pid must still be listed
        after its pidfd exists; an NVML error on that listing signals none of them (unsure).
        """
        pin = getattr(self.deps.signaller, "pin", None)
        if pin is None:
            return pids
        fresh = {p for p in pids if pin(p)}
        if not fresh:
            return pids
        again = self._processes(c)
        still = set(self._with_holders(c, again)) if again is not None else set()
        return [p for p in pids if p not in fresh or p in still]

    def _verify_no_contexts(self, c: _Cycle, allowed: set[int], what: str) -> None:
        for _ in range(3):  # a transient NVML error gets two more tries
            pids = self._processes(c)
            if pids is not None:
                others = [p for p in pids if p not in allowed and p not in self.deps.own_pids]
                if what == _AFTER_DRAIN:
                    c.record.contexts_after_drain = len(others)
                if others:
                    owners = ", ".join(f"{p} ({self.deps.owners(p).describe(self.deps.pod_name)})" for p in others)
                    raise BarrierFailure(f"{len(others)} context(s) on the device {what}: pids {owners}")
                return
            c.clock.sleep(self.deps.config.poll_interval_s)
        raise BarrierFailure(f"cannot list the device's processes {what}: NVML keeps failing")

    def _release(self, c: _Cycle) -> EvidenceRecord:
        """Verified: compute mode back to DEFAULT, then remove the guard, then CLEAN.

        MIG before CUDA 13.3: DEFAULT is the only mode there is; the step succeeds (see
        :meth:`_Cycle.set_mode`), never "interrupted" for it.
        """
        c.crash("releasing")
        if c.transient is not None:  # DynamicMIG: our instance goes; the driver creates its own at prepare
            try:
                assert self.deps.partitions is not None
                self.deps.partitions.destroy(c.transient)
            except BackendError as error:
                c.record.result = "interrupted"
                c.record.reason = f"verified clean; destroying the transient instance failed (retried later): {error}"
                return c.record
            c.crash("transient-destroyed")
            c.target = None
            c.state.transient_uuid = None
            self.deps.store.save(c.state)
        elif c.target is None:  # DynamicMIG, no instance at the placement: no compute mode to restore
            c.state.transient_uuid = None
        elif not c.set_mode(ComputeMode.DEFAULT):
            # Clean but unusable for CUDA; retry on the next reconcile, keep it out of service.
            c.record.result = "interrupted"
            c.record.reason = "verified clean; restoring compute mode DEFAULT failed (retried later)"
            return c.record
        c.crash("release-mode")
        try:
            self.deps.guard.untaint(c.device.name, c.clock)
        except GuardError as error:
            c.record.result = "interrupted"
            c.record.reason = f"verified clean; guard removal failed (retried later): {error}"
            return c.record
        c.crash("release-untainted")
        c.end_phase()
        c.state.phase, c.state.updated = Phase.CLEAN, c.clock.wall()
        c.state.claim = c.state.tenant_namespace = c.state.reason = c.state.boundary = None
        c.state.policy = c.state.reset = None
        self.deps.store.save(c.state)
        return c.record

    def _quarantine(self, c: _Cycle, reason: str, session: ScrubSession | None) -> EvidenceRecord:
        _LOG.error("quarantining %s: %s", c.device.name, reason)
        c.state.reason = reason
        c.enter(Phase.QUARANTINED, point="quarantine")
        if session is not None:
            session.close()
        c.record.result, c.record.reason = "quarantined", reason
        if self.deps.config.quarantine_policy is QuarantinePolicy.TAINT_AND_PROHIBIT:
            c.record.compute_mode_guard = c.set_mode(ComputeMode.PROHIBITED)
            if c.state.ci_guard is not None:
                c.record.compute_instance_guard = True
            elif not c.record.compute_mode_guard and c.mode_unsupported and c.target is not None:
                problem = self._close_instances(c.device, c.target, c.state, c.clock)
                c.record.compute_instance_guard = problem is None
                if problem is not None:
                    c.record.warnings.append(problem)
        c.crash("quarantine-mode")
        tainted = False
        try:
            tainted = self.deps.guard.taint(c.device.name, "quarantined", c.clock, reason)
            if not tainted:
                c.record.warnings.append(f"quarantine taint: {self.deps.guard.describe(c.device.name)}")
        except GuardError as error:
            c.record.warnings.append(f"quarantine taint failed (retried by the agent): {error}")
        c.crash("quarantine-tainted")
        if not (tainted or c.record.compute_mode_guard or c.record.compute_instance_guard):
            self._scrub_unguarded(c)
        self.deps.guard.event(c.device.name, "DeviceQuarantined", reason, c.clock)
        return self._finish(c, c.record)

    def _defer(self, c: _Cycle, reason: str, session: ScrubSession | None) -> EvidenceRecord:
        """DynamicMIG without MIG management: guarded (quarantine taint), no per-device Event, retried
        once the agent can manage MIG (:mod:`.migaccess` said so node-wide, once)."""
        _LOG.warning("%s stays guarded: %s", c.device.name, reason)
        c.state.reason = reason
        c.enter(Phase.QUARANTINED, point="quarantine")
        if session is not None:
            session.close()
        c.record.result, c.record.reason = "deferred", reason
        try:
            if not self.deps.guard.taint(c.device.name, "quarantined", c.clock, reason):
                c.record.warnings.append(f"guard taint: {self.deps.guard.describe(c.device.name)}")
        except GuardError as error:
            c.record.warnings.append(f"guard taint failed (retried by the agent): {error}")
        return self._finish(c, c.record)

    def _finish(self, c: _Cycle, record: EvidenceRecord) -> EvidenceRecord:
        c.end_phase()
        self.deps.evidence.write(record)
        if self.deps.metrics is not None:
            self.deps.metrics.observe(record)
        return record


def memory_figures(record: EvidenceRecord, memory: MemoryInfo) -> int:
    """NVML's memory before a context: reserved, usable (total - reserved), free; returns the unaccounted bytes."""
    usable = memory.total - memory.reserved
    missing = max(0, usable - memory.free)
    record.bytes_reserved, record.bytes_usable = memory.reserved, usable
    record.bytes_free_before_context, record.bytes_unaccounted = memory.free, missing
    return missing


def record_verify(record: EvidenceRecord, bytes_free: int, bytes_total: int, result: VerifyResult) -> None:
    """Coverage against what the device holds for CUDA (NVML total - reserved), not free memory."""
    record.bytes_verified, record.nonzero_words = result.bytes_verified, result.nonzero_words
    record.control_planted, record.control_found = result.control_planted, result.control_found
    if result.seconds > 0:
        record.verify_bytes_per_s = result.bytes_verified / result.seconds
    usable = record.bytes_usable if record.bytes_usable is not None else bytes_total
    record.coverage = min(1.0, result.bytes_verified / usable) if usable else 0.0
    record.coverage_of_free = result.bytes_verified / bytes_free if bytes_free else 0.0
    record.coverage_of_total = result.bytes_verified / bytes_total if bytes_total else 0.0
    record.bytes_not_covered = max(0, bytes_total - result.bytes_verified)

def check_verify(record: EvidenceRecord, bytes_zeroed: int, result: VerifyResult, threshold: float) -> None:
    """The verify proves the fill: positive control, no non-zero word, every zeroed byte read, coverage of
    free memory at ``threshold``, every usable byte not verified explained (the barrier and the canary's
    cleanup alike). Raises :class:`BarrierFailure` with the reason."""
    if result.control_planted is not None and result.control_found != result.control_planted:
        raise BarrierFailure(f"verify positive control failed: the kernel counted {result.control_found} of "
                             f"{result.control_planted} planted marker words, so its zero count is not proof")
    if result.nonzero_words:
        raise BarrierFailure(f"verify found {result.nonzero_words} non-zero 64-bit words after the fill")
    if result.bytes_verified != bytes_zeroed:  # counted by the kernel itself, not echoed back
        raise BarrierFailure(f"the verify kernel read {result.bytes_verified} of {bytes_zeroed} zeroed bytes")
    if (record.coverage_of_free or 0.0) < threshold:
        raise BarrierFailure(f"coverage {record.coverage_of_free or 0.0:.4f} of free memory is below {threshold}")
    usable = record.bytes_usable
    if usable is not None:
        # Every usable byte not verified must be explained: our context, what was allowed as
        # unaccounted before it, and the fill's slack (less than one allocation granule).
        explained = (record.bytes_context or 0) + (record.bytes_unaccounted or 0) + FILL_SLACK_BYTES
        uncovered = max(0, usable - result.bytes_verified)
        if uncovered > explained:
            raise BarrierFailure(
                f"{uncovered} of {usable} usable bytes were not verified, more than our context "
                f"({record.bytes_context}), the allowed unaccounted memory ({record.bytes_unaccounted}) "
                f"and the fill's slack ({FILL_SLACK_BYTES}) explain")


def _joined(claims: str, claim: str | None) -> str:
    """``a, b`` plus ``claim`` (a co-holder of a shared device), without repeats."""
    names = [n for n in claims.split(", ") if n]
    if claim and claim not in names:
        names.append(claim)
    return ", ".join(names)


def _add_holder(state: DeviceState, tenant: Tenant) -> None:
    """Keep the claim uid and its pods with the state (every holder since the last clean release)."""
    if tenant.uid and tenant.uid not in state.claim_uids:
        state.claim_uids = [*state.claim_uids, tenant.uid]
    state.pod_uids = sorted({*state.pod_uids, *tenant.pods})
