"""The barrier's health gates (:mod:`.health`): baseline at the start, gates before the release."""

from __future__ import annotations

from dra_constructs.agent.barrier_cycle import BarrierFailure, _BarrierBase, _Cycle
from dra_constructs.agent.health import baseline, check


class _HealthMixin(_BarrierBase):
    """Health gates of a cycle."""

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
