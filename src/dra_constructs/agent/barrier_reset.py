"""Cold reset at release: destroy and recreate the MIG instance, or reset the GPU."""

from __future__ import annotations

import dataclasses

from dra_constructs.agent.backends.base import ComputeMode
from dra_constructs.agent.barrier_cycle import BarrierFailure, _Cycle
from dra_constructs.agent.barrier_health import _HealthMixin
from dra_constructs.agent.config import PartitionReset
from dra_constructs.agent.health import baseline, carried_since
from dra_constructs.agent.state import Phase, ResetRecord


class _ResetMixin(_HealthMixin):
    """The cold reset of a cycle and its evidence."""

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
