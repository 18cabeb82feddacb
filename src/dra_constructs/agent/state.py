"""Crash-safe per-device state: one JSON file per device, replaced atomically.

The barrier writes the phase it is *entering* before doing anything in it, so after a crash
(SIGKILL, OOM, node agent restart) the file says where it stopped. Recovery rule: a device in
any phase before ``releasing`` is sanitized again from the start; ``releasing`` is only written
after a verify that passed in the same cycle, so finishing that release is safe; it carries the
verify figures (:class:`VerifyFigures`, the drain's ``contexts_after_drain`` included) so the
record of a release finished after a crash still proves what was zeroed (without them it is
not released: the barrier runs again). ``resetting`` (a cold partition reset under way) recovers
by checking that the partition exists again and running the whole barrier on it. A per-device
``flock`` keeps two barriers (agent and a hand-run ``once``/``release``) off the same device.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = ["DeviceState", "Phase", "ResetRecord", "StateStore", "VerifyFigures", "dump_states"]


class Phase(StrEnum):
    """Where a device is. ``INTERMEDIATE`` phases mean "a barrier was cut off here"."""

    UNKNOWN = "unknown"            # never seen, or its UUID changed: treat as dirty
    ALLOCATED = "allocated"        # a tenant holds it; guarded
    DIRTY = "dirty"                # the tenant left; barrier pending
    GUARD = "guard"
    DRAIN = "drain"
    VERIFY_CONTEXTS = "verify-contexts"
    FILL = "fill"
    VERIFY = "verify"
    RESETTING = "resetting"        # cold partition reset under way (old UUID kept in ``reset``)
    RELEASING = "releasing"        # verify passed in this cycle; removing the guard
    CLEAN = "clean"
    QUARANTINED = "quarantined"

    @property
    def needs_barrier(self) -> bool:
        """A device in this phase must be sanitized from the start before anyone gets it."""
        return self in _NEEDS_BARRIER


_NEEDS_BARRIER = frozenset(
    {Phase.UNKNOWN, Phase.DIRTY, Phase.GUARD, Phase.DRAIN, Phase.VERIFY_CONTEXTS, Phase.FILL, Phase.VERIFY,
     Phase.RESETTING}
)


class VerifyFigures(BaseModel):
    """What the verify of the cycle in ``releasing`` proved (copied into its evidence record)."""

    model_config = ConfigDict(extra="ignore")

    contexts_after_drain: int | None = None
    bytes_total: int = 0
    bytes_free: int = 0
    bytes_zeroed: int = 0
    bytes_verified: int = 0
    nonzero_words: int | None = None
    coverage: float = 0.0
    coverage_of_free: float | None = None
    coverage_of_total: float | None = None
    bytes_not_covered: int | None = None
    bytes_reserved: int | None = None
    bytes_usable: int | None = None
    bytes_unaccounted: int | None = None
    bytes_free_before_context: int | None = None
    bytes_context: int | None = None
    control_planted: int | None = None
    control_found: int | None = None
    fill_bytes_per_s: float | None = None
    verify_bytes_per_s: float | None = None


class ResetRecord(BaseModel):
    """A cold partition reset: persisted when it starts (phase ``resetting``), kept for evidence."""

    model_config = ConfigDict(extra="ignore")

    reset_type: str
    old_uuid: str
    new_uuid: str | None = None
    started: float = 0.0
    seconds: float | None = None
    #: The device as enumerated when the reset started (``DeviceInfo`` fields): after a crash
    #: between destroy and create NVML no longer lists it, and recovery must still find it.
    device: dict[str, Any] | None = None
    #: Health counters (:data:`.health.COUNTERS`) gained during the claim up to the reset, read just
    #: before it (a reset zeroes the volatile ECC counters); None: not read (health gates off, or
    #: the read failed: the gates then fail closed for the counters).
    health_carried: dict[str, int] | None = None
    #: True once the health baseline was re-read after the reset (the counters the gates compare with).
    health_rebased: bool = False


class CiGuardRecord(BaseModel):
    """Static MIG where compute mode cannot be set: the compute instances were destroyed as the local guard.

    ``layout`` is what was destroyed (None: cut off before it was saved: one CI over the whole GI
    is recreated); ``device`` the device as it was, so an agent restarted meanwhile (NVML lists no
    MIG device without a CI) still knows the slice.
    """

    model_config = ConfigDict(extra="ignore")

    layout: list[tuple[int, int, int]] | None = None
    device: dict[str, Any]
    closed_at: float = 0.0


class DeviceState(BaseModel):
    """The persisted state of one device."""

    model_config = ConfigDict(extra="ignore")

    device: str
    uuid: str = ""
    phase: Phase = Phase.UNKNOWN
    cycle: int = 0
    verified_cycle: int = 0
    claim: str | None = None
    tenant_namespace: str | None = None
    reason: str | None = None
    updated: float = 0.0
    verify: VerifyFigures | None = None
    reset: ResetRecord | None = None
    boundary: str | None = None
    policy: dict[str, Any] | None = None  # the claim's PreemptionPolicy parameters, kept for its release
    transient_uuid: str | None = None  # DynamicMIG: the instance the barrier created (destroyed at release)
    #: DynamicMIG: saved (durably) before the transient create, cleared once ``transient_uuid`` is saved
    #: or the create failed: an instance found at the placement while it is set is the agent's own.
    transient_pending: bool = False
    #: Compute mode PROHIBITED set while the API was down and nothing was known of the device
    #: (no saved state): lifted when a live claim is seen to hold it; a barrier takes it over otherwise.
    local_guard: bool = False
    #: The compute instances are destroyed as the guard (MIG before CUDA 13.3); recreated before the fill.
    ci_guard: CiGuardRecord | None = None
    #: Every claim (uid) that held the device since it was last released clean, and the UIDs of
    #: their pods: the only processes a barrier may signal. Kept from allocation on, because
    #: ``status.reservedFor`` is empty once a claim is deallocated.
    claim_uids: list[str] = []
    pod_uids: list[str] = []
    #: Compute mode PROHIBITED set because every pod of the device's claims was terminating (no
    #: taints): lifted when a running pod holds the claim again (a no-surge rollout on a shared claim).
    leaving_guard: bool = False
    #: A turnover the agent missed (another claim took the device with no barrier in between and
    #: its pods already ran there): the claim(s) that held it before; reported by the next barrier.
    missed_turnover: str | None = None
    #: Health counters (volatile uncorrected ECC, critical XIDs) at allocation, or at the last clean
    #: release / the barrier's start when the allocation was not seen: the release gates compare with them.
    health_baseline: dict[str, int] | None = None


class StateStore:
    """``<state_dir>/devices/<device>.json`` plus ``<state_dir>/locks/<device>.lock``."""

    def __init__(self, state_dir: str | Path, fsync: bool = True) -> None:
        self.root = Path(state_dir)
        self._devices = self.root / "devices"
        self._locks = self.root / "locks"
        self._dir = str(self._devices)  # string paths: Path joins cost more than the reads (see all())
        self._fsync = fsync
        self._devices.mkdir(parents=True, exist_ok=True)
        self._locks.mkdir(parents=True, exist_ok=True)

    def _path(self, device: str) -> Path:
        return self._devices / f"{device}.json"

    def _file(self, device: str, suffix: str = ".json") -> str:
        return os.path.join(self._dir, device + suffix)

    def load(self, device: str, uuid: str | None = None) -> DeviceState:
        """The stored state; ``UNKNOWN`` if absent, unreadable, or recorded for another UUID."""
        try:
            state = DeviceState.model_validate_json(_read_at(None, self._file(device)))
        except (OSError, ValidationError):
            return DeviceState(device=device, uuid=uuid or "")
        if state.phase is Phase.RESETTING:
            return state  # a reset changes the UUID: recovery needs the old one and what was under way
        if uuid is not None and state.uuid and state.uuid != uuid:
            # Another physical device or MIG instance now has this name: nothing is known of it.
            return DeviceState(device=device, uuid=uuid, cycle=state.cycle)
        return state

    def unreadable(self, device: str) -> str | None:
        """Why the device's state file exists but cannot be read or parsed; None if absent or valid.

        :meth:`load` answers ``UNKNOWN`` for both; an absent file is "never seen", a corrupt one
        may have held any tenant (isolation keeps the GPU's taint for it, :mod:`.isolation`).
        """
        path = self._path(device)
        try:
            DeviceState.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            return None
        except OSError as error:
            return f"cannot read {path}: {error.strerror}"
        except ValidationError as error:
            return f"{path} is not a device state ({error.error_count()} error(s))"
        return None

    def save(self, state: DeviceState, durable: bool = True) -> None:
        """Replace the file atomically (write, fsync, rename, fsync the directory).

        ``durable=False`` skips the fsyncs: for phases whose loss on power failure changes
        nothing (every phase between ``guard`` and ``verify`` recovers the same way).
        """
        path = self._file(state.device)
        tmp = self._file(state.device, f".tmp{os.getpid()}")
        data = state.model_dump_json().encode()
        sync = self._fsync and durable
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)  # as open(tmp, "wb"), unbuffered
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if sync:
            dir_fd = os.open(self._devices, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def all(self) -> list[DeviceState]:
        """Every stored device state, sorted by device name (unreadable or invalid files left out).

        Read with ``os.open``/``os.read`` relative to the directory: a start reads every state, and
        the buffered file objects of ``open()`` were half of that read's time (the fault simulation
        starts the agent ~1,000 times a run, docs/testing.md "Sixth round").
        """
        states = []
        with os.scandir(self._devices) as entries:  # names, not Paths: sorting Paths cost more than reading
            names = sorted(e.name for e in entries if e.name.endswith(".json"))
        directory = os.open(self._devices, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for name in names:
                try:
                    data = _read_at(directory, name)
                    states.append(DeviceState.model_validate_json(data))
                except (OSError, ValidationError):
                    continue
        finally:
            os.close(directory)
        return states

    @contextlib.contextmanager
    def lock(self, device: str) -> Iterator[None]:
        """Exclusive per-device lock across processes; released by the kernel if we die."""
        with open(self._locks / f"{device}.lock", "a+b") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _read_at(directory: int | None, name: str) -> bytes:
    """The whole file ``name`` (relative to the open directory ``directory``, if given).

    ``os.open``/``os.read``: without the buffered file object of ``open()``, half the cost of a small read.
    """
    fd = os.open(name, os.O_RDONLY, dir_fd=directory)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def dump_states(states: list[DeviceState]) -> str:
    """States as pretty JSON (for ``dra-sanitizer status``)."""
    return json.dumps([s.model_dump(mode="json") for s in states], indent=2, sort_keys=True)
