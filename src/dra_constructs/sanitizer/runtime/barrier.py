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

import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass, field

from .backends.base import (
    BackendError,
    ComputeMode,
    MemoryScrubber,
    NvmlBackend,
    ProcessSignaller,
    ScrubSession,
    VerifyResult,
)
from .clock import Clock
from .config import AgentConfig, QuarantinePolicy
from .devices import DeviceInfo
from .evidence import EvidenceRecord, EvidenceWriter
from .guard import Guard, GuardError
from .kube import Tenant
from .metrics import Metrics
from .state import DeviceState, Phase, StateStore

__all__ = ["CRASH_POINTS", "Barrier", "BarrierDeps", "BarrierFailure"]

_LOG = logging.getLogger("dra_sanitizer.barrier")

#: Every point at which fault tests may kill the agent (``crash_hook(device, point)``).
CRASH_POINTS: tuple[str, ...] = (
    "guard", "drain", "drain-signalled", "drain-killed", "verify-contexts", "fill", "fill-opened",
    "filled", "verify", "verified", "releasing", "release-mode", "release-untainted", "quarantine",
    "quarantine-mode", "quarantine-tainted",
)


_AFTER_DRAIN = "after the drain"
_SAME_RECOVERY_AS_GUARD = frozenset({Phase.DRAIN, Phase.VERIFY_CONTEXTS, Phase.FILL, Phase.VERIFY})


class BarrierFailure(Exception):
    """The device could not be proven clean; the message is the quarantine reason."""


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


class _Cycle:
    """The mutable bookkeeping of one run: evidence record + phase timing."""

    def __init__(self, deps: BarrierDeps, device: DeviceInfo, state: DeviceState, trigger: str) -> None:
        self.deps = deps
        self.device = device
        self.state = state
        self.clock = deps.clock_for(device.name)
        self.record = EvidenceRecord(
            node=deps.config.node_name, device=device.name, uuid=device.uuid, cycle=state.cycle,
            trigger=trigger, claim=state.claim, tenant_namespace=state.tenant_namespace,
            started_at=self.clock.wall(), scrub_on_free_disabled=deps.scrub_on_free_disabled,
            taint=deps.guard.describe(device.name),
        )
        self._phase: str | None = None
        self._phase_start = 0.0

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
        """Best-effort compute-mode change; failures become warnings in the evidence."""
        try:
            self.deps.nvml.set_compute_mode(self.device, mode)
            return True
        except BackendError as error:
            self.record.warnings.append(f"compute mode {mode.value}: {error}")
            return False


class Barrier:
    """Runs barrier cycles; thread-safe across devices (one per-device file lock each)."""

    def __init__(self, deps: BarrierDeps) -> None:
        self.deps = deps

    # --- entry points -----------------------------------------------------------------------

    def run(self, device: DeviceInfo, trigger: str, tenant: Tenant | None = None) -> EvidenceRecord:
        """One full cycle from the guard on; returns (and writes) its evidence record."""
        with self.deps.store.lock(device.name):
            state = self.deps.store.load(device.name, device.uuid)
            state.uuid = device.uuid
            state.cycle += 1
            if tenant is not None:
                state.claim, state.tenant_namespace = tenant.claim, tenant.namespace
            return self._cycle(_Cycle(self.deps, device, state, trigger))

    def recover(self, device: DeviceInfo) -> EvidenceRecord | None:
        """After a restart: redo an interrupted barrier, finish a verified release, re-guard."""
        state = self.deps.store.load(device.name, device.uuid)
        if state.phase.needs_barrier:
            return self.run(device, "recovery" if state.phase is not Phase.UNKNOWN else "startup-unknown")
        if state.phase is Phase.RELEASING:
            with self.deps.store.lock(device.name):
                state = self.deps.store.load(device.name, device.uuid)
                if state.phase is not Phase.RELEASING or state.verified_cycle != state.cycle:
                    return None
                cycle = _Cycle(self.deps, device, state, "recovery-release")
                cycle.record.result = "released"
                return self._finish(cycle, self._release(cycle))
        if state.phase is Phase.QUARANTINED:
            clock = self.deps.clock_for(device.name)
            if self.deps.config.quarantine_policy is QuarantinePolicy.TAINT_AND_PROHIBIT:
                try:
                    self.deps.nvml.set_compute_mode(device, ComputeMode.PROHIBITED)
                except BackendError as error:
                    _LOG.warning("%s: cannot re-apply PROHIBITED: %s", device.name, error)
            try:
                self.deps.guard.taint(device.name, "quarantined", clock, state.reason)
            except GuardError as error:
                _LOG.warning("%s: cannot re-apply quarantine taint: %s", device.name, error)
        return None

    def mark_allocated(self, device: DeviceInfo, tenant: Tenant) -> None:
        """A claim now holds the device: guard it for the moment it is released."""
        with self.deps.store.lock(device.name):
            state = self.deps.store.load(device.name, device.uuid)
            if state.phase not in (Phase.CLEAN, Phase.ALLOCATED):
                # Quarantined or mid-barrier (possible only without taints): the barrier owns it.
                _LOG.warning("%s allocated to %s while %s", device.name, tenant.claim, state.phase.value)
                return
            state.uuid, state.phase = device.uuid, Phase.ALLOCATED
            state.claim, state.tenant_namespace = tenant.claim, tenant.namespace
            state.updated = self.deps.clock_for(device.name).wall()
            self.deps.store.save(state)
        try:
            self.deps.guard.taint(device.name, "in-use", self.deps.clock_for(device.name))
        except GuardError as error:
            _LOG.error("%s: cannot place the guard taint while allocated: %s", device.name, error)

    def tenant_leaving(self, device: DeviceInfo) -> None:
        """The last pod using the device is terminating: without taints, refuse new contexts now."""
        if self.deps.guard.has_taints:
            return
        try:
            self.deps.nvml.set_compute_mode(device, ComputeMode.PROHIBITED)
        except BackendError as error:
            _LOG.error("%s: no taint API and compute mode PROHIBITED failed: %s", device.name, error)

    def operator_release(self, device: DeviceInfo, reason: str, operator: str) -> EvidenceRecord:
        """An operator releases a quarantined device: logged, then a full barrier must pass."""
        state = self.deps.store.load(device.name, device.uuid)
        clock = self.deps.clock_for(device.name)
        note = EvidenceRecord(
            kind="operator-release", node=self.deps.config.node_name, device=device.name, uuid=device.uuid,
            cycle=state.cycle, trigger="operator", started_at=clock.wall(), result="operator-release",
            reason=f"{reason} (was: {state.phase.value}: {state.reason})", operator=operator,
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
            self._guard(c)
            c.enter(Phase.DRAIN)
            self._drain(c)
            c.enter(Phase.VERIFY_CONTEXTS)
            self._verify_no_contexts(c, allowed=set(), what=_AFTER_DRAIN)
            c.enter(Phase.FILL)
            c.set_mode(ComputeMode.EXCLUSIVE_PROCESS)  # our context will be the only one
            self._check_unaccounted_memory(c)
            session = self.deps.scrubber.open(c.device, self.deps.config.fill_timeout_s)
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
            c.state.verified_cycle = c.state.cycle
            c.enter(Phase.RELEASING)
            c.record.result = "released"
            return self._finish(c, self._release(c))
        except (BarrierFailure, BackendError, GuardError) as error:
            return self._quarantine(c, str(error), session)
        except Exception as error:  # a bug must not release a device: fail closed
            _LOG.exception("%s: internal error in the barrier", c.device.name)
            return self._quarantine(c, f"internal error: {type(error).__name__}: {error}", session)
        finally:
            if session is not None:
                session.close()

    def _check_unaccounted_memory(self, c: _Cycle) -> None:
        """Before our context: free must be total - reserved, less a small epsilon.

        Memory that no listed process holds (a process in another PID namespace, a leaked
        allocation) is invisible to the process list and to coverage of free memory; it is
        exactly what the next tenant could read, so it fails the barrier.
        """
        try:
            memory = self.deps.nvml.memory(c.device)
        except BackendError as error:
            if error.fatal:
                raise
            raise BarrierFailure(f"cannot read the device's memory before the fill: {error}") from error
        c.record.bytes_reserved = memory.reserved
        c.record.bytes_free_before_context = memory.free
        usable = memory.total - memory.reserved
        epsilon = self.deps.config.unaccounted_memory_bytes
        if epsilon is None:
            epsilon = int((1 - self.deps.config.coverage_threshold) * usable)
        missing = usable - memory.free
        if missing > epsilon:
            raise BarrierFailure(
                f"unaccounted memory: {missing} bytes of the device are in use although no process holds a "
                f"context (free {memory.free} of {memory.total}, driver-reserved {memory.reserved}, allowed "
                f"{epsilon}); a process NVML does not list (another PID namespace?) holds memory the fill "
                f"cannot reach")

    def _record_verify(self, c: _Cycle, bytes_free: int, bytes_total: int, result: VerifyResult) -> None:
        c.record.bytes_verified, c.record.nonzero_words = result.bytes_verified, result.nonzero_words
        c.record.control_planted, c.record.control_found = result.control_planted, result.control_found
        if result.seconds > 0:
            c.record.verify_bytes_per_s = result.bytes_verified / result.seconds
        c.record.coverage = result.bytes_verified / bytes_free if bytes_free else 0.0
        c.record.coverage_of_total = result.bytes_verified / bytes_total if bytes_total else 0.0
        c.record.bytes_not_covered = max(0, bytes_total - result.bytes_verified)

    def _check_verify(self, c: _Cycle, bytes_zeroed: int, result: VerifyResult) -> None:
        if result.control_planted is not None and result.control_found != result.control_planted:
            raise BarrierFailure(f"verify positive control failed: the kernel counted {result.control_found} of "
                                 f"{result.control_planted} planted marker words, so its zero count is not proof")
        if result.nonzero_words:
            raise BarrierFailure(f"verify found {result.nonzero_words} non-zero 64-bit words after the fill")
        if result.bytes_verified != bytes_zeroed:  # counted by the kernel itself, not echoed back
            raise BarrierFailure(f"the verify kernel read {result.bytes_verified} of {bytes_zeroed} zeroed bytes")
        threshold = self.deps.config.coverage_threshold
        if c.record.coverage < threshold:
            raise BarrierFailure(f"coverage {c.record.coverage:.4f} of free memory is below {threshold}")

    def _guard(self, c: _Cycle) -> None:
        c.record.compute_mode_guard = c.set_mode(ComputeMode.PROHIBITED)
        try:
            tainted = self.deps.guard.taint(c.device.name, "sanitizing", c.clock)
        except GuardError as error:
            # Sanitizing is still the best thing to do; the evidence says the taint is missing.
            c.record.warnings.append(f"guard taint: {error}")
            tainted = False
        if not tainted:
            c.record.taint = f"missing: {self.deps.guard.describe(c.device.name)}"

    def _processes(self, c: _Cycle) -> list[int] | None:
        """NVML's process list; None on a transient error (a fatal one raises)."""
        try:
            return self.deps.nvml.processes(c.device)
        except BackendError as error:
            if error.fatal:
                raise
            c.record.warnings.append(str(error))
            return None

    def _drain(self, c: _Cycle) -> None:
        cfg = self.deps.config
        start = c.clock.monotonic()
        killed = False
        termed: set[int] = set()
        while True:
            now = c.clock.monotonic()
            pids = self._processes(c)
            if pids is not None:
                pids = [p for p in pids if p not in self.deps.own_pids]
                if not pids:
                    return
                if not killed and now - start >= cfg.grace_period_s:
                    killed = True
                    c.crash("drain-killed")
                if killed:
                    for pid in pids:
                        if pid not in c.record.pids_sigkill:
                            c.record.pids_sigkill.append(pid)
                        self.deps.signaller.signal(pid, signal.SIGKILL)
                else:
                    for pid in pids:
                        if pid not in termed:
                            termed.add(pid)
                            c.record.pids_sigterm.append(pid)
                            self.deps.signaller.signal(pid, signal.SIGTERM)
                    c.crash("drain-signalled")
            if now - start >= cfg.drain_timeout_s:
                still = "unknown (NVML failing)" if pids is None else ", ".join(map(str, pids))
                raise BarrierFailure(f"drain timeout after {cfg.drain_timeout_s:g}s: contexts still held by "
                                     f"pids {still}")
            c.clock.sleep(cfg.poll_interval_s)

    def _verify_no_contexts(self, c: _Cycle, allowed: set[int], what: str) -> None:
        for _ in range(3):  # a transient NVML error gets two more tries
            pids = self._processes(c)
            if pids is not None:
                others = [p for p in pids if p not in allowed and p not in self.deps.own_pids]
                if what == _AFTER_DRAIN:
                    c.record.contexts_after_drain = len(others)
                if others:
                    raise BarrierFailure(f"{len(others)} context(s) on the device {what}: pids "
                                         f"{', '.join(map(str, others))}")
                return
            c.clock.sleep(self.deps.config.poll_interval_s)
        raise BarrierFailure(f"cannot list the device's processes {what}: NVML keeps failing")

    def _release(self, c: _Cycle) -> EvidenceRecord:
        """Verified: compute mode back to DEFAULT, then remove the guard, then CLEAN."""
        c.crash("releasing")
        if not c.set_mode(ComputeMode.DEFAULT):
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
        c.state.claim = c.state.tenant_namespace = c.state.reason = None
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
        c.crash("quarantine-mode")
        try:
            if not self.deps.guard.taint(c.device.name, "quarantined", c.clock, reason):
                c.record.warnings.append(f"quarantine taint: {self.deps.guard.describe(c.device.name)}")
        except GuardError as error:
            c.record.warnings.append(f"quarantine taint failed (retried by the agent): {error}")
        c.crash("quarantine-tainted")
        self.deps.guard.event(c.device.name, "DeviceQuarantined", reason, c.clock)
        return self._finish(c, c.record)

    def _finish(self, c: _Cycle, record: EvidenceRecord) -> EvidenceRecord:
        c.end_phase()
        self.deps.evidence.write(record)
        if self.deps.metrics is not None:
            self.deps.metrics.observe(record)
        return record
