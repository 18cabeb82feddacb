"""How a cycle ends: release, quarantine, or deferral, and its evidence record."""

from __future__ import annotations

import logging

from dra_constructs.agent.backends.base import BackendError, ComputeMode, ScrubSession
from dra_constructs.agent.barrier_ciguard import _CiGuardMixin
from dra_constructs.agent.barrier_cycle import AWAITING_ZERO_CONTEXTS, _Cycle
from dra_constructs.agent.config import QuarantinePolicy
from dra_constructs.agent.evidence import EvidenceRecord
from dra_constructs.agent.guard import GuardError
from dra_constructs.agent.state import Phase

_LOG = logging.getLogger("dra_sanitizer.barrier")


class _OutcomeMixin(_CiGuardMixin):
    """The end of a cycle."""

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
