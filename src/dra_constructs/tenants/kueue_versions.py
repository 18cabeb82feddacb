"""Kueue releases the tenants' configuration is emitted for: which DRA feature needs which gate, when.

Facts only (pure Python). Source: kubernetes-sigs/kueue ``pkg/features/kube_features.go`` at the
tags v0.14.0-v0.19.2 (the versioned gate table), ``apis/config/v1beta2/configuration_types.go``
(``DeviceClassMapping.sources``: counter sources from v0.18, capacity sources from v0.19) and
``site/content/en/docs/concepts/dynamic_resource_allocation.md`` ("In Kueue 0.18, the DRA feature
gates were renamed": ``DynamicResourceAllocation`` -> ``KueueDRAIntegration``,
``DRAExtendedResources`` -> ``KueueDRAIntegrationExtendedResource``; the old names are deprecated
and locked off in 0.18 and gone in 0.19, so a configuration naming them stops the manager).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dra_constructs.errors import DraConstructsError

__all__ = [
    "DEFAULT_KUEUE_VERSION",
    "KUEUE_FEATURES",
    "SUPPORTED_KUEUE_MINORS",
    "KueueFeature",
    "KueueVersion",
]

#: Kueue 0.x minors whose configuration (``config.kueue.x-k8s.io/v1beta2`` with the renamed
#: ``KueueDRAIntegration*`` gates) the tenants emit.
SUPPORTED_KUEUE_MINORS = range(18, 20)
DEFAULT_KUEUE_VERSION = "0.19"

_VERSION_RE = re.compile(r"^v?0\.(\d+)(?:\.(\d+))?$")


@dataclass(frozen=True)
class KueueFeature:
    """One DRA feature of Kueue: its gate, the minor it came as alpha (off) and went beta (on)."""

    name: str
    gate: str
    alpha: int
    beta: int | None
    old_gate: str | None = None

    def on_by_default(self, minor: int) -> bool:
        """Whether Kueue 0.``minor`` enables it without a ``featureGates`` entry."""
        return self.beta is not None and minor >= self.beta


#: The DRA features of Kueue, by the name the library uses for them.
KUEUE_FEATURES: dict[str, KueueFeature] = {f.name: f for f in (
    # ResourceClaimTemplate quota through deviceClassMappings: alpha 0.14 as DynamicResourceAllocation.
    KueueFeature("device-class-mappings", "KueueDRAIntegration", alpha=14, beta=18,
                 old_gate="DynamicResourceAllocation"),
    # Extended resources backed by DRA: alpha 0.17 as DRAExtendedResources, renamed (alpha) 0.18, beta 0.19.
    KueueFeature("extended-resources", "KueueDRAIntegrationExtendedResource", alpha=17, beta=19,
                 old_gate="DRAExtendedResources"),
    # deviceClassMappings[].sources[].counter (partitionable devices, KEP-4815).
    KueueFeature("counter-sources", "KueueDRAIntegrationPartitionableDevices", alpha=18, beta=19),
    # deviceClassMappings[].sources[].capacity (consumable capacity, KEP-5075).
    KueueFeature("capacity-sources", "KueueDRAIntegrationConsumableCapacity", alpha=19, beta=None),
)}


@dataclass(frozen=True)
class KueueVersion:
    """A Kueue release (``0.minor``) the emitted configuration must work with."""

    minor: int

    @classmethod
    def parse(cls, version: str | KueueVersion | None, where: str = "TenantPlatform") -> KueueVersion:
        """``"0.19"``, ``"v0.18.6"``; ``None`` gives :data:`DEFAULT_KUEUE_VERSION`."""
        if isinstance(version, KueueVersion):
            return version
        text = DEFAULT_KUEUE_VERSION if version is None else str(version).strip()
        match = _VERSION_RE.match(text)
        if match is None:
            raise DraConstructsError(where, "kueue_version", version, "not a Kueue version",
                                     'write "0.MINOR" or "0.MINOR.PATCH", for example "0.19"')
        minor = int(match.group(1))
        if minor not in SUPPORTED_KUEUE_MINORS:
            first, last = SUPPORTED_KUEUE_MINORS.start, SUPPORTED_KUEUE_MINORS.stop - 1
            raise DraConstructsError(
                where, "kueue_version", version,
                f"the tenants' Kueue configuration is written for Kueue 0.{first}-0.{last} "
                "(config.kueue.x-k8s.io/v1beta2 with the KueueDRAIntegration* gates renamed in 0.18; "
                "older releases gate DRA quota behind the alpha DynamicResourceAllocation gate and 0.15-0.17 "
                "refuse the CEL selectors of catalog claims)",
                f"upgrade Kueue to 0.{first} or later and pass kueue_version='0.{last}' (or the release you run)",
            )
        return cls(minor)

    def __str__(self) -> str:
        return f"0.{self.minor}"

    def has(self, feature: str) -> bool:
        """Whether this release has ``feature`` (a key of :data:`KUEUE_FEATURES`) at all."""
        return self.minor >= KUEUE_FEATURES[feature].alpha

    def gates_for(self, features: set[str] | frozenset[str]) -> dict[str, bool]:
        """``featureGates`` the configuration must set for ``features``: those off by default here."""
        out = {}
        for name in sorted(features):
            feature = KUEUE_FEATURES[name]
            if self.has(name) and not feature.on_by_default(self.minor):
                out[feature.gate] = True
        return dict(sorted(out.items()))
