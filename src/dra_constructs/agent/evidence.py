"""Evidence: one JSON record per barrier cycle, to the log and appended to a file.

An operator proves what happened to a device from these records alone: who held it, which
PIDs were signalled, how many contexts remained, how many bytes were zeroed and verified, how
long each phase took, and why it was released or quarantined.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dra_constructs.agent.health import Attestation, HealthGate

__all__ = ["EvidenceRecord", "EvidenceWriter", "Selftest"]

_LOG = logging.getLogger("dra_sanitizer.evidence")


class Selftest(BaseModel):
    """What the residue canary (:mod:`.canary`) wrote in one context and read in a fresh one."""

    model_config = ConfigDict(extra="forbid")

    model: str
    driver_version: str
    bytes_written: int = 0
    bytes_read: int = 0
    residue_words: int = Field(default=0, description="Words of the pattern the fresh context read back.")
    other_nonzero_words: int = Field(default=0, description="Non-zero words that are not the pattern.")
    verdict: Literal["clean", "residue", "inconclusive"] = "inconclusive"
    seconds: float = 0.0


class EvidenceRecord(BaseModel):
    """What one barrier cycle did to one device."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["barrier", "operator-release", "missed-turnover", "selftest"] = "barrier"
    node: str
    device: str
    uuid: str
    cycle: int
    trigger: str = Field(description="Why the cycle ran: deallocated, startup-unknown, recovery, once, ...")
    claim: str | None = None
    tenant_namespace: str | None = None
    started_at: float = 0.0
    pids_sigterm: list[int] = Field(default_factory=list)
    pids_sigkill: list[int] = Field(default_factory=list)
    pods: list[str] = Field(
        default_factory=list, description="UIDs of the released claims' pods: the only processes signalled.")
    foreign_processes: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Processes with a context on the device (NVML) or an fd on its nodes that the released claims "
                    "did not own ({pid, owner, pod_uid, nvml_listed, device_nodes, comm, mps}): never signalled; the "
                    "device is not released while one lives.")
    device_handle_scan: dict[str, Any] | None = Field(
        default=None,
        description="The drain's last /proc/*/fd scan (agent/devhandles.py): the device's nodes matched, PIDs "
                    "scanned, seconds, exempt monitors, unreadable fd dirs (unknown, not blocking), a mapping problem.")
    missed_turnover: str | None = Field(
        default=None, description="Claims that held the device before a turnover the agent did not see.")
    contexts_after_drain: int | None = None
    bytes_total: int = 0
    bytes_free: int = 0
    bytes_zeroed: int = 0
    bytes_verified: int = 0
    nonzero_words: int | None = None
    coverage: float = Field(
        default=0.0, description="Verified bytes / what the device holds for CUDA (NVML total - reserved): below "
                                 "1.0 by our own context and the fill's slack, never 1.0 when a byte was not read.")
    coverage_of_free: float | None = Field(
        default=None, description="Verified bytes / free bytes after our context (the fill's completeness).")
    coverage_of_total: float | None = Field(default=None, description="Verified bytes / total device bytes.")
    bytes_not_covered: int | None = Field(
        default=None,
        description="Total - verified: driver-reserved memory, our own context (never filled; with "
                    "scrub-on-free off it may hold the previous tenant's data) and allocation slack.",
    )
    bytes_reserved: int | None = Field(default=None, description="NVML's driver-reserved memory.")
    bytes_usable: int | None = Field(default=None, description="NVML total - reserved before our context.")
    bytes_unaccounted: int | None = Field(
        default=None, description="Usable - free before our context: in use although no listed process holds it.")
    bytes_free_before_context: int | None = Field(default=None, description="NVML free before our context.")
    bytes_context: int | None = Field(default=None, description="Memory our own context took (not filled).")
    control_planted: int | None = Field(default=None, description="Verify positive control: markers planted.")
    control_found: int | None = Field(default=None, description="Markers the verify kernel counted.")
    phase_seconds: dict[str, float] = Field(default_factory=dict)
    fill_bytes_per_s: float | None = None
    verify_bytes_per_s: float | None = None
    compute_mode_guard: bool | None = Field(default=None, description="PROHIBITED/EXCLUSIVE set OK.")
    compute_instance_guard: bool | None = Field(
        default=None, description="MIG without compute mode (NVML before CUDA 13.3): its compute instances are "
                                  "destroyed, so no context can be created on it (quarantine, local guard).")
    compute_instances_recreated: list[str] | None = Field(
        default=None, description="[old UUID, new UUID]: the compute instances destroyed as a guard were recreated.")
    taint: str | None = Field(default=None, description="The guard in place, or why there is none.")
    scrub_on_free_disabled: bool | None = None
    attestation: Attestation | None = Field(
        default=None, description="The driver regime: scrub-on-free, persistence, CC and MIG mode, versions.")
    health: list[HealthGate] | None = Field(
        default=None, description="The health gates checked before the release (agent/health.py); None: not run.")
    result: Literal["released", "quarantined", "interrupted", "operator-release", "deferred", "adopted",
                    "clean", "residue", "inconclusive"] = "interrupted"
    selftest: Selftest | None = Field(default=None, description="The residue canary's figures (kind selftest).")
    reason: str | None = None
    operator: str | None = None
    warnings: list[str] = Field(default_factory=list)
    # --- policy, boundary, cold reset, dynamic partitions ---
    boundary: str | None = Field(default=None, description="The tenant's security boundary (tenant_boundary).")
    policy: dict[str, Any] | None = Field(default=None, description="The claim's PreemptionPolicy parameters.")
    reset_type: str | None = Field(default=None, description="mig-instance | gpu: a cold reset in this cycle.")
    reset_old_uuid: str | None = None
    reset_new_uuid: str | None = None
    reset_seconds: float | None = None
    guarded_overlaps: list[str] = Field(
        default_factory=list, description="DynamicMIG: placements tainted because they overlap this one.")
    transient_instance: str | None = Field(
        default=None, description="DynamicMIG: UUID of the instance the agent created to sanitize a freed placement.")


class EvidenceWriter:
    """Appends records as JSON lines (flushed and fsynced) and logs each one."""

    def __init__(self, path: str | Path | None, fsync: bool = True) -> None:
        self.path = Path(path) if path else None
        self._fsync = fsync
        self._lock = threading.Lock()
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record: EvidenceRecord) -> None:
        """Record one cycle; a failing disk is logged, never hides the record from the log."""
        line = record.model_dump_json()
        _LOG.info(line)
        if self.path is None:
            return
        with self._lock:
            try:
                with open(self.path, "a", encoding="utf-8") as handle:
                    handle.write(line + "\n")
                    if self._fsync:
                        handle.flush()
                        os.fsync(handle.fileno())
            except OSError as error:
                _LOG.error("cannot append evidence to %s: %s", self.path, error)
