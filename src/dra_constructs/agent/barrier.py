"""The preemption barrier, per device: guard, drain, verify contexts, zero-fill, verify, release.

Fail-closed: any failure (a drain past its limit, a context that should not be there, a CUDA
error, coverage below the threshold, a non-zero word, an unexpected exception) quarantines the
device, and only that device: state ``quarantined`` with the reason, the DeviceTaintRule value
``quarantined``, NVML compute mode ``PROHIBITED`` (policy permitting), an Event, and an
evidence record. It stays so until an operator release, which runs the whole barrier again.

Crash safety: the phase being entered is persisted before any of its effects (see
:mod:`.state`); ``crash_hook`` lets fault tests kill the agent at every such point.

Layout: this module holds :class:`Barrier` (entry points, recovery, the cycle's order) and
re-exports the public names of its parts: :mod:`.barrier_cycle` (dependencies, failures,
reason prefixes, crash points), :mod:`.barrier_drain`, :mod:`.barrier_verify`,
:mod:`.barrier_health`, :mod:`.barrier_instances`, :mod:`.barrier_reset`, :mod:`.barrier_ciguard`,
:mod:`.barrier_outcome` and :mod:`.barrier_local`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from dra_constructs.agent.backends.base import BackendError, ComputeMode, ComputeModeUnsupported, ScrubSession
from dra_constructs.agent.barrier_cycle import (
    _AFTER_DRAIN,
    _SELF_CLEARING,
    AWAITING_ZERO_CONTEXTS,
    CRASH_POINTS,
    FOREIGN_CONTEXTS,
    HANDLE_SCAN_FAILED,
    TRANSIENT_VANISHED,
    BarrierDeps,
    BarrierFailure,
    _Cycle,
    _Deferred,
)
from dra_constructs.agent.barrier_drain import _DrainMixin
from dra_constructs.agent.barrier_instances import _InstancesMixin
from dra_constructs.agent.barrier_local import _LocalGuardMixin
from dra_constructs.agent.barrier_outcome import _OutcomeMixin
from dra_constructs.agent.barrier_reset import _ResetMixin
from dra_constructs.agent.barrier_verify import _VerifyMixin, check_verify, memory_figures, record_verify
from dra_constructs.agent.config import QuarantinePolicy
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.evidence import EvidenceRecord
from dra_constructs.agent.gpulock import GpuLock, GpuLocks
from dra_constructs.agent.guard import GuardError
from dra_constructs.agent.health import attest, baseline
from dra_constructs.agent.kube import Tenant
from dra_constructs.agent.migaccess import MIG_UNMANAGEABLE
from dra_constructs.agent.state import DeviceState, Phase, VerifyFigures

__all__ = ["AWAITING_ZERO_CONTEXTS", "CRASH_POINTS", "FOREIGN_CONTEXTS", "HANDLE_SCAN_FAILED", "Barrier", "BarrierDeps",
           "BarrierFailure", "check_verify", "memory_figures", "record_verify"]

_LOG = logging.getLogger("dra_sanitizer.barrier")


class Barrier(_LocalGuardMixin, _OutcomeMixin, _ResetMixin, _InstancesMixin, _DrainMixin, _VerifyMixin):
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
