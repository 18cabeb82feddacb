"""Typed catalog entries: a GPU model and the MIG profiles it supports."""

from __future__ import annotations

import re
from functools import cached_property

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["GpuSpec", "MigProfile"]

_PROFILE_RE = re.compile(r"^(?P<g>\d)g\.(?P<gb>\d+)gb(?P<me>\+me)?$")

#: GPU-instance profile IDs that NVML uses, by (compute slices, memory slices, media extensions).
#: A30 uses its own IDs (``_A30_PROFILE_IDS``). Source: NVIDIA MIG User Guide profile tables.
_PROFILE_IDS: dict[tuple[int, int, bool], int] = {
    (1, 1, False): 19, (1, 1, True): 20, (1, 2, False): 15, (2, 2, False): 14,
    (3, 4, False): 9, (4, 4, False): 5, (7, 8, False): 0,
}
_A30_PROFILE_IDS: dict[tuple[int, int, bool], int] = {
    (1, 1, False): 14, (1, 1, True): 21, (2, 2, False): 5, (2, 2, True): 6, (4, 4, False): 0,
}


class MigProfile(BaseModel):
    """One MIG GPU-instance profile of one GPU model, e.g. ``3g.40gb`` on an A100 80GB."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="Profile name as NVML and the DRA driver's `profile` attribute spell it.")
    max_count: int = Field(gt=0, description="Most instances of this profile on one GPU.")
    memory_slices: int = Field(gt=0, description="Memory slices the instance occupies.")
    multiprocessors: int = Field(gt=0, description="Streaming multiprocessors (approximate, [INFER]).")
    memory_mib: int = Field(gt=0, description="Memory NVML reports for the instance (estimate, [INFER]).")
    profile_id: int = Field(ge=0, description="NVML GPU-instance profile ID.")
    placements: tuple[int, ...] = Field(description="Memory-slice start of every possible placement (`-lgipp`).")
    copy_engines: int = Field(ge=0, description="Copy engines of the instance.")
    decoders: int = Field(ge=0, description="NVDEC engines of the instance.")
    encoders: int = Field(ge=0, description="NVENC engines of the instance.")
    jpeg_engines: int = Field(ge=0, description="NVJPG engines of the instance.")
    ofa_engines: int = Field(ge=0, description="Optical-flow accelerators of the instance.")

    @cached_property
    def compute_slices(self) -> int:
        """The ``Ng`` part of the name."""
        return int(_parse(self.name).group("g"))

    @cached_property
    def marketed_gb(self) -> int:
        """The ``NNgb`` part of the name (marketing GB, not what NVML reports)."""
        return int(_parse(self.name).group("gb"))

    @cached_property
    def media_extensions(self) -> bool:
        """``+me`` variants carry the media engines (at most one per GPU)."""
        return _parse(self.name).group("me") is not None

    @property
    def device_name_part(self) -> str:
        """The profile as the driver writes it inside device names: dots dropped, then every other
        character outside ``[a-z0-9-]`` made ``-`` (``1g.10gb+me`` -> ``1g10gb-me``; the driver's
        ``ToCanonicalName``, same rule as ``sanitizer.runtime.devices.mig_device_name``)."""
        return re.sub(r"[^a-z0-9-]", "-", self.name.replace(".", "").lower()).strip("-")


#: Possible placement starts (``nvidia-smi mig -lgipp``) by (total memory slices, compute
#: slices, memory slices). Source: NVIDIA MIG User Guide placement diagrams, NVIDIA/go-nvml
#: ``pkg/nvml/mock/gpus`` (A100, A30); the driver's comment that a B200 3g.90gb takes 4 of 8
#: memory slices confirms the same layout on Hopper and Blackwell.
_PLACEMENTS: dict[tuple[int, int, int], tuple[int, ...]] = {
    (8, 1, 1): (0, 1, 2, 3, 4, 5, 6), (8, 1, 2): (0, 2, 4, 6), (8, 2, 2): (0, 2, 4),
    (8, 3, 4): (0, 4), (8, 4, 4): (0,), (8, 7, 8): (0,),
    (4, 1, 1): (0, 1, 2, 3), (4, 2, 2): (0, 2), (4, 4, 4): (0,),
}


def _engines(gpu_key: str, g: int, slices: int, me: bool) -> tuple[int, int, int, int]:
    """(copy engines, decoders, JPEG, OFA) of one instance ([INFER] from the MIG User Guide tables).

    Chosen so that every valid MIG layout fits the full GPU's engines: the memory slices are
    what limits a layout, as on the hardware.
    """
    full = g == 7 or (gpu_key == "A30" and g == 4)
    media = 1 if me or full else 0
    if gpu_key == "A30":
        return g, {1: 0, 2: 2, 4: 4}[g] + (1 if me and g == 1 else 0), media, media
    if gpu_key.startswith("A100"):
        decoders = 5 if g == 7 else {1: 0, 2: 1, 3: 2, 4: 2}[g] + (1 if me or (g == 1 and slices == 2) else 0)
        return g, decoders, media, media
    return g, g, g, 1 if me or full else 0


class GpuSpec(BaseModel):
    """A GPU model as the NVIDIA DRA driver publishes it, plus its MIG profiles."""

    model_config = ConfigDict(frozen=True)

    key: str = Field(description="Catalog key, e.g. `H100_80GB`.")
    product_names: tuple[str, ...] = Field(description="NVML product names (SXM, PCIe, ... variants).")
    architecture: str = Field(description="The driver's `architecture` attribute, e.g. `Hopper`.")
    compute_capability: str = Field(description="`cudaComputeCapability` as semver, e.g. `9.0.0`.")
    memory_mib: int = Field(gt=0, description="NVML total memory in MiB (the `memory` capacity).")
    memory_source: str = Field(description="Where the NVML total comes from ([SRC]/[3P]/[INFER]).")
    max_mig_instances: int = Field(ge=0)
    mig_profiles: tuple[MigProfile, ...] = ()

    @property
    def memory_bytes(self) -> int:
        """NVML total in bytes."""
        return self.memory_mib * 1024 * 1024

    @cached_property
    def profiles_by_name(self) -> dict[str, MigProfile]:
        """MIG profiles keyed by name."""
        return {p.name: p for p in self.mig_profiles}

    def profile(self, name: str) -> MigProfile:
        """The named profile; ``KeyError`` if this GPU does not support it."""
        return self.profiles_by_name[name]


def _parse(name: str) -> re.Match[str]:
    match = _PROFILE_RE.match(name)
    if match is None:  # pragma: no cover - catalog data is validated by tests
        raise ValueError(f"bad MIG profile name {name!r}")
    return match


def build_profiles(
    gpu_key: str,
    total_memory_mib: int,
    profiles: dict[str, int],
    sms_by_compute_slices: dict[int, int],
) -> tuple[MigProfile, ...]:
    """Derive the typed profiles of one GPU from ``{name: max_count}`` and its SM layout.

    Memory slices: the base ``1g`` profile (the one with the most instances) is one slice and the
    full profile is all of them; the rest scale with their marketed size. Memory in MiB is an
    estimate (NVML reports slightly less than the name says): the share of total memory by slices,
    less 5% for the instance's reserved memory (the full profile: less 1.875%, as NVML reports on
    an A100 80GB: 80,384 of 81,920 MiB). Selectors built from the catalog never depend on these
    estimates; they pin the ``profile`` attribute, which the driver reports exactly.
    """
    total_slices = 4 if gpu_key == "A30" else 8
    base_gb = min(int(_parse(n).group("gb")) for n in profiles)
    ids = _A30_PROFILE_IDS if gpu_key == "A30" else _PROFILE_IDS
    result = []
    for name, max_count in profiles.items():
        match = _parse(name)
        g, gb, me = int(match.group("g")), int(match.group("gb")), match.group("me") is not None
        slices = total_slices if g == 7 else max(1, round(gb / base_gb))
        copy_engines, decoders, jpeg, ofa = _engines(gpu_key, g, slices, me)
        # The full profile keeps all but NVML's reservation (A100: 80,384 of 81,920 MiB).
        share = 0.98125 if slices == total_slices else slices / total_slices * 0.95
        result.append(MigProfile(
            name=name,
            max_count=max_count,
            memory_slices=slices,
            multiprocessors=sms_by_compute_slices[g],
            memory_mib=int(total_memory_mib * share),
            profile_id=ids.get((g, slices, me), ids.get((g, slices, False), 0)),
            placements=_PLACEMENTS[(total_slices, g, slices)],
            copy_engines=copy_engines, decoders=decoders, encoders=0, jpeg_engines=jpeg, ofa_engines=ofa,
        ))
    return tuple(result)
