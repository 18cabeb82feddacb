"""The DRA feature gates per Kubernetes minor: stage and default (facts only; :class:`Target` asks them).

Source: kubernetes ``pkg/features/kube_features.go`` versioned gate table (v1.37.2; a test reads it
from the Go module cache of the tests' control plane where present), summarised in
``shared/reference/dra-api.md`` section 1.2 and ``dra-2026.md``. A beta gate is on by default unless
marked otherwise: DRADeviceTaintRules went beta in 1.36 *off* ("depends on an off-by-default beta
API", the DeviceTaintRule ``v1beta2`` version), so DeviceTaintRule is served by default only from
1.37 (GA, ``v1``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FEATURE_GATES", "GateFact"]


@dataclass(frozen=True)
class GateFact:
    """One feature gate's life: the minors it became alpha, beta and GA (``None``: not (yet))."""

    name: str
    alpha: int | None
    beta: int | None = None
    beta_on: bool = True
    ga: int | None = None

    def stage(self, minor: int) -> str | None:
        """``"alpha"``, ``"beta"`` or ``"GA"`` in Kubernetes 1.``minor``; ``None`` before the gate exists."""
        if self.ga is not None and minor >= self.ga:
            return "GA"
        if self.beta is not None and minor >= self.beta:
            return "beta"
        if self.alpha is not None and minor >= self.alpha:
            return "alpha"
        return None

    def on_by_default(self, minor: int) -> bool:
        """Whether default feature gates of 1.``minor`` enable it (GA always, beta unless marked off)."""
        stage = self.stage(minor)
        return stage == "GA" or (stage == "beta" and self.beta_on)

    def describe(self, minor: int) -> str:
        """``"DRADeviceTaintRules: beta, off by default in 1.36"``."""
        stage = self.stage(minor)
        if stage is None:
            return f"{self.name}: not in 1.{minor}"
        return f"{self.name}: {stage}, {'on' if self.on_by_default(minor) else 'off'} by default in 1.{minor}"


def _gates(*facts: GateFact) -> dict[str, GateFact]:
    return {fact.name: fact for fact in facts}


#: Every DRA gate the library reasons about.
FEATURE_GATES: dict[str, GateFact] = _gates(
    GateFact("DRAAdminAccess", alpha=32, beta=34, ga=36),
    GateFact("DRAResourceClaimDeviceStatus", alpha=32, beta=33, ga=37),
    GateFact("DRAPrioritizedList", alpha=33, beta=34, ga=36),
    GateFact("DRAPartitionableDevices", alpha=33, beta=36),
    GateFact("DRADeviceTaints", alpha=33, beta=36, ga=37),
    GateFact("DRADeviceTaintRules", alpha=35, beta=36, beta_on=False, ga=37),
    GateFact("DRAConsumableCapacity", alpha=34, beta=36),
    GateFact("DRAExtendedResource", alpha=34, beta=36, ga=37),
    GateFact("DRADeviceBindingConditions", alpha=34, beta=36),
    GateFact("DRASchedulerFilterTimeout", alpha=None, beta=34),
    # Writers of ResourceClaim status need resourceclaims/binding (allocation, reservedFor) and
    # resourceclaims/driver (status.devices) from 1.36 (KEP-4817; pkg/registry/resource/utils.go).
    GateFact("DRAResourceClaimGranularStatusAuthorization", alpha=None, beta=36),
    GateFact("DRAListTypeAttributes", alpha=36),
)
