"""Which NVIDIA DRA driver release publishes which topology attribute (issue 22 item 4).

An alignment (``matchAttribute``) over an attribute the driver does not publish fits no node: a
device without the attribute is never chosen. The catalog's synthetic devices publish every
attribute (the driver at HEAD), so the construct-time check asks this table for the release the
cluster runs (``set_nvidia_driver_version(app, ...)``; default: the newest release).

Sources (kubernetes-sigs/dra-driver-nvidia-gpu, formerly NVIDIA/k8s-dra-driver-gpu):
- ``resource.kubernetes.io/pcieRoot`` on GPU and MIG devices: PR #429 (July 2025, fixes #400),
  in v25.3.0 (issue #575, "plugin crashes when pcieRoot attributes can't be determined", is
  labelled backport-25.3; PR #577 made a missing root a warning). DynamicMIG devices (v25.12+)
  lack it: issue #880 ("also pcieRootAttr is missing"), open at the August 2026 snapshot.
- ``resource.kubernetes.io/numaNode`` on GPU, MIG and VFIO devices: PR #1165 (merged 2026-06-02,
  after v0.4.0 of 2026-05-15): only on main (v0.5.0-dev), scalar unless DRAListTypeAttributes.
  Earlier releases publish no NUMA attribute on GPUs (VFIO devices: ``gpu.nvidia.com/numa``, v25.12+).
- ``gpu.nvidia.com/parentUUID`` on MIG devices: every release.
- Versions: calendar 25.3 / 25.8 / 25.12 / 26.4 are semver 0.1 / 0.2 / 0.3 / 0.4
  (``pkg/featuregates/featuregates.go``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from dra_constructs.errors import DraConstructsError

__all__ = [
    "DEFAULT_NVIDIA_DRIVER",
    "NVIDIA_DRIVER_RELEASES",
    "NvidiaDriverRelease",
    "nvidia_driver_release",
]


@dataclass(frozen=True)
class NvidiaDriverRelease:
    """One release line of the NVIDIA DRA driver and the topology attributes its devices publish."""

    name: str  #: as the project tags it, e.g. ``v25.8`` or ``v0.4``; ``main`` for unreleased code
    semver: str  #: ``0.2``; ``main`` for unreleased code
    pcie_root: bool  #: ``resource.kubernetes.io/pcieRoot`` on whole GPUs and static MIG devices
    pcie_root_dynamic_mig: bool  #: ... and on DynamicMIG devices
    numa_node: bool  #: ``resource.kubernetes.io/numaNode`` on whole GPUs and MIG devices

    def __str__(self) -> str:
        return self.name

    def missing(self, on: str, kind: str, dynamic_mig: bool) -> str | None:
        """Why devices of ``kind`` (``gpu`` / ``mig``) lack the attribute of alignment ``on``, or ``None``."""
        if on == "numaNode" and not self.numa_node:
            return (f"the NVIDIA DRA driver {self} publishes no resource.kubernetes.io/numaNode on GPU or MIG "
                    "devices (it came after v0.4: kubernetes-sigs/dra-driver-nvidia-gpu#1165)")
        if on == "pcieRoot" and kind == "mig" and dynamic_mig and not self.pcie_root_dynamic_mig:
            return (f"the NVIDIA DRA driver {self} publishes no resource.kubernetes.io/pcieRoot on DynamicMIG "
                    "devices (kubernetes-sigs/dra-driver-nvidia-gpu#880)")
        if on == "pcieRoot" and not self.pcie_root:
            return f"the NVIDIA DRA driver {self} publishes no resource.kubernetes.io/pcieRoot"
        return None


#: Oldest first. The last entry is unreleased code (``main``).
NVIDIA_DRIVER_RELEASES: Final = (
    NvidiaDriverRelease("v25.3", "0.1", pcie_root=True, pcie_root_dynamic_mig=False, numa_node=False),
    NvidiaDriverRelease("v25.8", "0.2", pcie_root=True, pcie_root_dynamic_mig=False, numa_node=False),
    NvidiaDriverRelease("v25.12", "0.3", pcie_root=True, pcie_root_dynamic_mig=False, numa_node=False),
    NvidiaDriverRelease("v0.4", "0.4", pcie_root=True, pcie_root_dynamic_mig=False, numa_node=False),
    NvidiaDriverRelease("main", "main", pcie_root=True, pcie_root_dynamic_mig=False, numa_node=True),
)
#: The newest release: what a cluster installing the driver's chart today runs.
DEFAULT_NVIDIA_DRIVER: Final = NVIDIA_DRIVER_RELEASES[-2]

_CALENDAR = {"25.3": "0.1", "25.8": "0.2", "25.12": "0.3", "26.4": "0.4"}
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?(?:-[0-9A-Za-z.-]+)?$")


def nvidia_driver_release(version: str | NvidiaDriverRelease | None, where: str) -> NvidiaDriverRelease:
    """The release line of ``version`` (``"25.8"``, ``"v25.12.0"``, ``"0.4.1"``, ``"26.4"``, ``"main"``).

    ``None``: :data:`DEFAULT_NVIDIA_DRIVER`. Patch versions and pre-release suffixes do not matter.
    """
    if version is None:
        return DEFAULT_NVIDIA_DRIVER
    if isinstance(version, NvidiaDriverRelease):
        return version
    text = str(version).strip()
    if text.lower() in ("main", "head", "master"):
        return NVIDIA_DRIVER_RELEASES[-1]
    match = _VERSION.match(text)
    if match:
        minor = f"{int(match.group(1))}.{int(match.group(2))}"
        semver = _CALENDAR.get(minor, minor)
        for release in NVIDIA_DRIVER_RELEASES:
            if release.semver == semver:
                return release
    known = ", ".join(f"{r.name} ({r.semver})" for r in NVIDIA_DRIVER_RELEASES)
    raise DraConstructsError(
        where, "nvidia_driver_version", version, "not a known NVIDIA DRA driver release",
        f"write one of {known}, e.g. '25.8' or '0.4' (patch versions are ignored); for a driver built from "
        "a newer commit use 'main', or check against your cluster's slices with set_inventory(app, 'slices.yaml')",
    )
