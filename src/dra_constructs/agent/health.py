"""Health gates checked before a device is released, and the driver state attested in every record.

A backend answers raw reads (:class:`HealthSource`); this module decides. Each read is a
:class:`Reading`: a value, or the NVML error, with ``unsupported`` set for
``NVML_ERROR_NOT_SUPPORTED`` / ``FUNCTION_NOT_FOUND`` (the driver or the GPU does not serve it).

Gates (issue 23 item 2), each a quarantine reason when it fails:

- ``ecc-mode``: ECC enabled (``nvmlDeviceGetEccMode`` current). Disabled fails when
  ``require_ecc`` (default True: GPUHammer makes ECC a precondition of reuse); a GPU without
  ECC (NOT_SUPPORTED) is "unavailable".
- ``ecc-uncorrected``: the volatile uncorrected ECC count (``nvmlDeviceGetTotalEccErrors``
  ``NVML_MEMORY_ERROR_TYPE_UNCORRECTED`` / ``NVML_VOLATILE_ECC``) is not above the count
  recorded at allocation (or at the last clean release, or at the barrier's start). GPU-wide:
  a MIG slice reads its parent GPU, so an error anywhere on the GPU fails every slice's release.
- ``row-remap``: ``nvmlDeviceGetRemappedRows`` pending or failure fails. nvml.h: "On
  MIG-enabled GPUs with active instances, querying the number of remapped rows is not
  supported": recorded "unavailable" (the ECC count and, R570+, the recovery action still
  run on the parent). Pre-Ampere (NOT_SUPPORTED without MIG):
  ``nvmlDeviceGetRetiredPagesPendingStatus`` instead (``retired-pages``).
- ``recovery-action``: ``NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`` must be NONE; any other value
  names the action (GPU_RESET, NODE_REBOOT, DRAIN_P2P, DRAIN_AND_RESET, ...). First in the
  CUDA 12.8 nvml.h (R570): older drivers answer NOT_SUPPORTED, "unavailable".
- ``xid``: critical XID events (``nvmlEventTypeXidCriticalError``) counted since the baseline,
  where the backend keeps an event set; none may have arrived.

A cold reset in the release zeroes the volatile ECC counters: compared with the baseline taken at
the allocation they would say "no new errors" for a claim that had some (a false pass), and a
baseline taken after the reset compared with a pre-reset count would fail a healthy GPU (a false
quarantine). So the barrier reads the counters just before the reset (what the claim gained so
far, ``carried``, persisted with the reset's record) and re-reads the baseline right after it;
the gates count ``carried`` plus what was gained since the reset. A ``carried`` that could not
be read fails the counter gates (fail closed): the errors before the reset cannot be ruled out.

A read that errors any other way fails its gate (fail closed). "unavailable" never passes
silently: it is in the record, and in a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from dra_constructs.agent.devices import DeviceInfo

__all__ = [
    "ATTESTATION_READS",
    "COUNTERS",
    "HEALTH_READS",
    "RECOVERY_ACTIONS",
    "Attestation",
    "HealthGate",
    "HealthReport",
    "HealthSource",
    "Reading",
    "attest",
    "baseline",
    "carried_since",
    "check",
]

#: nvml.h ``nvmlGpuRecoveryAction_t`` (go-nvml pkg/nvml/nvml.h at 2f9e261, lines 2207-2212; 6, 7: nvidia-ml-py 13.615).
RECOVERY_ACTIONS: dict[int, str] = {
    0: "NONE", 1: "GPU_RESET", 2: "NODE_REBOOT", 3: "DRAIN_P2P", 4: "DRAIN_AND_RESET",
    5: "RECOVER_IMEX_DOMAIN", 6: "BUS_RESET", 7: "SYSTEM_REBOOT",
}

#: The reads a :class:`HealthSource` answers for the gates.
HEALTH_READS: tuple[str, ...] = (
    "ecc_mode", "ecc_volatile_uncorrected", "remapped_rows", "retired_pages_pending", "recovery_action", "xid_count",
)
#: The reads compared against their value at the baseline (counters that only grow).
COUNTERS: tuple[str, ...] = ("ecc_volatile_uncorrected", "xid_count")
#: The node-wide and per-GPU driver state attested in every record.
ATTESTATION_READS: tuple[str, ...] = (
    "driver_version", "cuda_driver_version", "persistence_mode", "mig_mode", "conf_compute",
)


@dataclass(frozen=True)
class Reading:
    """One NVML read: ``value``, or ``error`` (``unsupported``: the driver or GPU does not serve it)."""

    value: Any = None
    error: str | None = None
    unsupported: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


class HealthSource(Protocol):
    """Raw health reads of the physical GPU under a device (a MIG slice: its parent)."""

    def read(self, device: DeviceInfo, names: tuple[str, ...]) -> dict[str, Reading]:
        """The named reads (:data:`HEALTH_READS`, :data:`ATTESTATION_READS`); never raises for one read."""


class HealthGate(BaseModel):
    """One gate's result in the evidence."""

    model_config = ConfigDict(extra="forbid")

    gate: str
    status: Literal["pass", "fail", "unavailable"]
    detail: str = ""
    value: Any = None


class Attestation(BaseModel):
    """The driver regime a record was made under; None where NVML could not say (``errors`` tells why)."""

    model_config = ConfigDict(extra="forbid")

    scrub_on_free_disabled: bool | None = None
    persistence_mode: bool | None = None
    conf_compute: dict[str, int] | None = Field(
        default=None, description="nvmlSystemGetConfComputeState: environment, ccFeature, devToolsMode.")
    mig_mode: bool | None = None
    driver_version: str | None = None
    cuda_driver_version: int | None = None
    amd_isolation: dict[str, Any] | None = Field(
        default=None, description="AMD: enforce_isolation of the partition, RAS, the last cleaner-shader run.")
    errors: dict[str, str] = Field(default_factory=dict)


@dataclass
class HealthReport:
    """The gates of one release check; ``failures`` are the quarantine reasons (empty: healthy)."""

    gates: list[HealthGate]
    failures: list[str]
    warnings: list[str]
    counters: dict[str, int]


def baseline(source: HealthSource | None, device: DeviceInfo) -> dict[str, int] | None:
    """The counters (:data:`COUNTERS`) now, for a later :func:`check`; None if none could be read."""
    if source is None:
        return None
    try:
        reads = source.read(device, COUNTERS)
    except Exception:  # a baseline is best effort: the gates then count from zero
        return None
    counters = {name: int(r.value) for name, r in reads.items() if r.ok and r.value is not None}
    return counters or None


def attest(source: HealthSource | None, device: DeviceInfo, scrub_on_free_disabled: bool | None) -> Attestation:
    """The attestation sub-object of a record (scrub-on-free as the agent read it at start)."""
    record = Attestation(scrub_on_free_disabled=scrub_on_free_disabled)
    if source is None:
        record.errors["backend"] = "this backend serves no driver-state reads"
        return record
    try:
        reads = source.read(device, ATTESTATION_READS)
    except Exception as error:  # the record is still written, saying why it lacks these
        record.errors["read"] = f"{type(error).__name__}: {error}"
        return record
    isolation = getattr(source, "isolation", None)  # the AMD source (backends/amd_health.py)
    if callable(isolation):
        record.amd_isolation = isolation(device)
    for name, reading in reads.items():
        if not reading.ok:
            record.errors[name] = f"unavailable: {reading.error}" if reading.unsupported else str(reading.error)
        elif name in ("persistence_mode", "mig_mode"):
            setattr(record, name, bool(reading.value))
        else:
            setattr(record, name, reading.value)
    return record


def carried_since(source: HealthSource | None, device: DeviceInfo,
                  since: dict[str, int] | None) -> dict[str, int] | None:
    """What the counters gained since ``since``, read now (before a reset zeroes them); None if unreadable."""
    now = baseline(source, device)
    if now is None:
        return None
    return {name: max(0, value - (since or {}).get(name, 0)) for name, value in now.items()}


def check(source: HealthSource, device: DeviceInfo, since: dict[str, int] | None, require_ecc: bool,
          carried: dict[str, int] | None = None, reset: bool = False) -> HealthReport:
    """Every gate on ``device``'s GPU; counters compared with ``since`` (None: counted from zero).

    ``reset``: a cold reset happened in this release; ``since`` is the baseline re-read after it and
    ``carried`` what the counters gained before it (None, or a counter missing: fails closed).
    """
    reads = source.read(device, (*HEALTH_READS, "mig_mode"))
    report = HealthReport([], [], [], {})
    mig_mode = reads["mig_mode"]
    mig = device.is_mig or bool(mig_mode.ok and mig_mode.value)  # a DynamicMIG whole GPU with MIG on too
    gates = report.gates

    def add(gate: str, status: Literal["pass", "fail", "unavailable"], detail: str = "", value: Any = None) -> None:
        gates.append(HealthGate(gate=gate, status=status, detail=detail, value=value))
        if status == "fail":
            report.failures.append(f"{gate}: {detail}")
        elif status == "unavailable":
            report.warnings.append(f"health gate {gate} unavailable: {detail}")

    def broken(gate: str, reading: Reading) -> bool:
        """Not served: unavailable; any other error: the gate fails (fail closed)."""
        if reading.ok:
            return False
        if reading.unsupported:
            add(gate, "unavailable", str(reading.error))
        else:
            add(gate, "fail", f"the read failed: {reading.error}")
        return True

    ecc = reads["ecc_mode"]
    if not broken("ecc-mode", ecc):
        if ecc.value:
            add("ecc-mode", "pass", "enabled", 1)
        elif require_ecc:
            add("ecc-mode", "fail", "ECC is disabled and require_ecc is set (enable it: nvidia-smi -e 1, reboot)", 0)
        else:
            add("ecc-mode", "unavailable", "ECC is disabled (require_ecc is off): uncorrectable errors go unseen", 0)
    count = reads["ecc_volatile_uncorrected"]
    if ecc.ok and not ecc.value:
        add("ecc-uncorrected", "unavailable", "ECC is disabled: no error counts")
    elif not broken("ecc-uncorrected", count):
        _counter(add, report, "ecc-uncorrected", "ecc_volatile_uncorrected", int(count.value), since,
                 "volatile uncorrectable ECC error(s) since the claim began", carried, reset)
    _remap(add, broken, reads, mig)
    action = reads["recovery_action"]
    if not broken("recovery-action", action):
        name = RECOVERY_ACTIONS.get(int(action.value), f"unknown action {action.value}")
        if int(action.value) == 0:
            add("recovery-action", "pass", name, 0)
        else:
            add("recovery-action", "fail", f"the driver asks for {name}", int(action.value))
    xid = reads["xid_count"]
    if not broken("xid", xid):
        _counter(add, report, "xid", "xid_count", int(xid.value), since, "critical XID event(s) during the claim",
                 carried, reset)
    return report


def _counter(add: Any, report: HealthReport, gate: str, name: str, now: int, since: dict[str, int] | None,
             what: str, carried: dict[str, int] | None = None, reset: bool = False) -> None:
    report.counters[name] = now
    before = (since or {}).get(name, 0)
    if not reset:
        if now > before:
            add(gate, "fail", f"{now - before} {what} (count {before} -> {now})", now)
        else:
            add(gate, "pass", f"count {now} (baseline {before})", now)
        return
    if carried is None or name not in carried:
        add(gate, "fail", f"the count before this release's cold reset (which zeroes it) could not be read: "
                          f"{what} cannot be ruled out", now)
        return
    gained = carried[name] + max(0, now - before)
    detail = f"{carried[name]} before the cold reset; count {before} -> {now} after it"
    if gained:
        add(gate, "fail", f"{gained} {what} ({detail})", now)
    else:
        add(gate, "pass", f"count {now} ({detail})", now)


def _remap(add: Any, broken: Any, reads: dict[str, Reading], mig: bool) -> None:
    rows = reads["remapped_rows"]
    if rows.ok:
        _corr, _unc, pending, failure = rows.value
        if failure:
            add("row-remap", "fail", "a row remapping failed (the GPU needs service)", list(rows.value))
        elif pending:
            add("row-remap", "fail", "row remapping pending (a GPU reset applies it)", list(rows.value))
        else:
            add("row-remap", "pass", "no remap pending or failed", list(rows.value))
        return
    if not rows.unsupported or mig:
        broken("row-remap", rows)  # MIG with live instances: not served (nvml.h): unavailable
        return
    add("row-remap", "unavailable", f"{rows.error} (pre-Ampere: page retirement instead)")
    pages = reads["retired_pages_pending"]
    if not broken("retired-pages", pages):
        if pages.value:
            add("retired-pages", "fail", "page retirement pending (a reboot or GPU reset applies it)", 1)
        else:
            add("retired-pages", "pass", "no retirement pending", 0)
