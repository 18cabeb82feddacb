"""The residue canary (``dra-sanitizer selftest``, issue 23 item 1).

Does memory a tenant leaves behind survive its exit on this node? One CUDA worker (a child
process, like a tenant) allocates nearly all free memory of a clean, unclaimed device, sets it
to a random pattern and exits without freeing anything: the driver frees it at process exit,
and scrubs it only if scrub-on-free is on. A fresh worker then allocates nearly all free memory
again and counts, with the verify kernel of :mod:`.backends.cuda`, the words equal to the
pattern (residue) and the other non-zero words; it then zero-fills and verifies, so the device
leaves the canary as clean as it came.

Verdicts: ``clean`` (no pattern word and no other non-zero word, and the fresh context read at
least half of what was written), ``residue`` (any pattern or non-zero word), ``inconclusive``
(a CUDA error, a read far smaller than the write, a cleanup that did not verify). Anything but
``clean`` switches the node's regime to "fill-and-verify is the only scrub": the barrier's
``scrub_on_free_disabled`` becomes true whatever ``/proc/driver/nvidia/params`` says (records,
attestation and the metric then say so; ``require_scrub_on_free`` quarantines), and a Warning
Event is posted. ``clean`` and ``residue`` are kept per (GPU model, driver version) in
``state_dir/selftest.json``: the agent runs the canary at start only for a pair it has no
verdict for, and re-applies a stored ``residue`` at every start.

Never on a claimed device: the device must be ``clean`` in its state file, not held by a claim
the agent knows, and without NVML-listed processes; it is tainted ``sanitizing`` and its state
set to ``guard`` (durable) for the run, so a crash mid-canary leaves a device the agent's
recovery sanitizes in full. On demand (``sanitized``) a device a tenant used is allowed too once
its last barrier released it clean and no claim holds it (the same lock, state and taint).

The cleanup passes the barrier's own coverage check (:func:`.barrier.check_verify`): the
record carries the same coverage figures as a barrier's; a cleanup that fails it is
``inconclusive`` and the device stays in ``guard`` (the whole barrier follows).

DynamicMIG placements (on demand only): the GPU instance is destroyed and recreated over the
same memory slices between the write and the read (:mod:`.canary_mig`).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from dra_constructs.agent.backends.base import BackendError, VerifyResult
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.evidence import EvidenceRecord, Selftest
from dra_constructs.agent.health import attest
from dra_constructs.agent.state import Phase
from dra_constructs.errors import DraConstructsError

if TYPE_CHECKING:
    from dra_constructs.agent.barrier import Barrier, BarrierDeps

__all__ = ["CANARY_FILE", "CanarySession", "apply_stored", "at_start", "finish", "identity", "on_demand",
           "run_selftest", "why_not"]

_LOG = logging.getLogger("dra_sanitizer.canary")

#: Verdicts per (GPU model, driver version), under ``state_dir``.
CANARY_FILE = "selftest.json"
_UNKNOWN = "unknown"
Verdict = Literal["clean", "residue", "inconclusive"]


@runtime_checkable
class CanarySession(Protocol):
    """A scrub session that also serves the canary (the CUDA worker, the simulated node)."""

    def write_pattern(self, pattern: int) -> int:
        """Set nearly all free memory to ``pattern``, then exit as a tenant does; bytes written."""

    def read_residue(self, pattern: int) -> tuple[int, int, int]:
        """(bytes read, pattern words, other non-zero words) over nearly all free memory."""

    def fill(self) -> Any:
        """Zero what it allocated (the barrier's fill)."""

    def verify(self) -> VerifyResult:
        """The barrier's verify."""

    def close(self) -> None:
        """Free everything (idempotent)."""


def identity(deps: BarrierDeps, device: DeviceInfo) -> tuple[str, str]:
    """(GPU model, driver version) of ``device``'s GPU; ``unknown`` where NVML does not say. A DynamicMIG
    placement's model carries :data:`.canary_mig.GI_RECREATE` (its release path is another)."""
    from dra_constructs.agent.canary_mig import GI_RECREATE

    if deps.health is None:
        return _UNKNOWN, _UNKNOWN
    try:
        reads = deps.health.read(device, ("model", "driver_version"))
    except Exception:  # the key is only a cache key: unknown means "run again next start"
        return _UNKNOWN, _UNKNOWN
    model, driver = reads["model"], reads["driver_version"]
    name = str(model.value) + (GI_RECREATE if device.dynamic and not device.whole_gpu else "")
    return (name if model.ok else _UNKNOWN), (str(driver.value) if driver.ok else _UNKNOWN)


def _key(model: str, driver: str) -> str:
    return f"{model}|{driver}"


def _path(deps: BarrierDeps) -> Path:
    return Path(deps.config.state_dir) / CANARY_FILE


def _stored(deps: BarrierDeps) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(_path(deps).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: the canary runs again (never a clean verdict assumed)
    return data if isinstance(data, dict) else {}


def _store(deps: BarrierDeps, key: str, entry: dict[str, Any]) -> None:
    data = _stored(deps)
    data[key] = entry
    path = _path(deps)
    tmp = path.with_suffix(".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as error:
        _LOG.error("cannot store the canary verdict in %s: %s (it runs again at the next start)", path, error)


def _switch(deps: BarrierDeps, why: str) -> None:
    """The node's regime: the fill is the only scrub, whatever the driver's params file says."""
    if deps.scrub_on_free_disabled is not True:
        _LOG.warning("residue canary: %s; treating the driver's scrub-on-free as off on this node: "
                     "fill-and-verify is the only scrub", why)
    deps.scrub_on_free_disabled = True
    if deps.metrics is not None:
        deps.metrics.scrub_on_free_disabled.set(1)


def apply_stored(deps: BarrierDeps, devices: Iterable[DeviceInfo]) -> None:
    """At start: a stored ``residue`` verdict for a (model, driver) of this node switches the regime."""
    stored = _stored(deps)
    if not stored:
        return
    for key in {_key(*identity(deps, d)) for d in devices}:
        entry = stored.get(key)
        if entry and entry.get("verdict") == "residue":
            _switch(deps, f"residue found on {entry.get('device')} ({key}) by an earlier run")
            if deps.metrics is not None:
                model, _, driver = key.partition("|")
                deps.metrics.selftest_residue.labels(model, driver).set(1)


def why_not(deps: BarrierDeps, device: DeviceInfo, claimed: Callable[[str], bool],
            sanitized: bool = False) -> str | None:
    """Why the canary may not use ``device`` (None: it may): claimed, not clean, contexts, DynamicMIG.

    ``sanitized`` (on demand): a device a tenant used is allowed too once its last barrier released
    it (state ``clean`` with ``verified_cycle == cycle``) and no claim holds it now; at start only a
    device no tenant used since its last clean state (the claims may not be known yet).
    """
    state = deps.store.load(device.name, device.uuid)
    if device.dynamic:
        from dra_constructs.agent import canary_mig

        return canary_mig.why_not(deps, device, claimed, state, sanitized)
    if claimed(device.name):
        return "claimed"
    used = bool(state.claim_uids) and not (sanitized and state.verified_cycle == state.cycle)
    if state.phase is not Phase.CLEAN or state.claim or used or state.local_guard or state.ci_guard:
        claim = f", claim {state.claim}" if state.claim else (", used since its last barrier" if used else "")
        return f"not clean and unclaimed (phase {state.phase.value}{claim})"
    try:
        pids = deps.nvml.processes(device)
    except BackendError as error:
        return f"NVML cannot list its processes: {error}"
    return f"processes hold contexts on it: {pids}" if pids else None


def _verdict(written: int, read: int, found: int, other: int, cleanup: str | None) -> tuple[Verdict, str | None]:
    if found or other:
        return "residue", (f"{found} words of the pattern and {other} other non-zero words survived a tenant's "
                           f"exit in {read} bytes read")
    if cleanup is not None:
        return "inconclusive", f"the cleanup did not verify: {cleanup}"
    if written <= 0 or read * 2 < written:
        return "inconclusive", f"the fresh context read {read} of {written} bytes written: too little to tell"
    return "clean", None


def run_selftest(deps: BarrierDeps, device: DeviceInfo, trigger: str,
                 claimed: Callable[[str], bool] = lambda _name: False, sanitized: bool = False) -> EvidenceRecord:
    """One canary on ``device``; the ``selftest`` evidence record (written). Raises
    :class:`DraConstructsError` if the device is not clean and unclaimed (``sanitized``: see :func:`why_not`)."""
    from dra_constructs.agent.canary_mig import gpu_lock

    clock = deps.clock_for(device.name)
    started_at = clock.wall()
    with gpu_lock(deps, device), deps.store.lock(device.name):
        refused = why_not(deps, device, claimed, sanitized)
        if refused is not None:
            raise DraConstructsError(f"device {device.name}", "--device", device.name,
                                     f"the canary refuses it: {refused}",
                                     "name a clean, unclaimed device (dra-sanitizer status), or omit --device")
        state = deps.store.load(device.name, device.uuid)
        state.phase = Phase.GUARD  # a crash mid-canary: recovery runs the whole barrier on it
        deps.store.save(state)
        deps.guard.taint(device.name, "sanitizing", clock, reason="residue canary")
        model, driver = identity(deps, device)
        figures = Selftest(model=model, driver_version=driver)
        record = EvidenceRecord(
            kind="selftest", node=deps.config.node_name, device=device.name, uuid=device.uuid, cycle=state.cycle,
            trigger=trigger, started_at=started_at, scrub_on_free_disabled=deps.scrub_on_free_disabled)
        detail: str | None = None
        half = int.from_bytes(os.urandom(4), "little") | 1  # never 0
        pattern = half | half << 32  # cuMemsetD32 sets 32 bits; the kernel compares 64-bit words
        start = time.monotonic()
        cleaned = False
        try:
            if device.dynamic:
                from dra_constructs.agent.canary_mig import gi_cycle  # DynamicMIG: GI destroy + recreate

                written, (read, found, other, cleanup) = gi_cycle(deps, device, pattern, record, state)
            else:
                written = _write(deps, device, pattern)
                read, found, other, cleanup = _read(deps, device, pattern, record)
            figures.bytes_written = written
            figures.bytes_read, figures.residue_words, figures.other_nonzero_words = read, found, other
            figures.verdict, detail = _verdict(figures.bytes_written, read, found, other, cleanup)
            cleaned = cleanup is None
        except Exception as error:  # any failure is inconclusive: the device stays in guard
            figures.verdict, detail = "inconclusive", f"{type(error).__name__}: {error}"
        figures.seconds = round(time.monotonic() - start, 6)
        if cleaned:  # the fresh context zero-filled and verified what it read: as clean as it came
            state.phase = Phase.CLEAN
            deps.store.save(state)
            # Under the device's lock: a claim allocated meanwhile (mark_allocated takes the lock)
            # must not lose the in-use taint it then places.
            deps.guard.untaint(device.name, clock)
    record.result, record.reason, record.selftest = figures.verdict, detail, figures
    record.attestation = attest(deps.health, device, deps.scrub_on_free_disabled)
    _report(deps, device, record, figures, clock)
    return record


def _write(deps: BarrierDeps, device: DeviceInfo, pattern: int) -> int:
    session = deps.scrubber.open(device, deps.config.fill_timeout_s)
    try:
        if not isinstance(session, CanarySession):
            raise BackendError("selftest", f"the {type(session).__name__} backend serves no residue canary")
        return session.write_pattern(pattern)
    finally:
        session.close()


def _read(deps: BarrierDeps, device: DeviceInfo, pattern: int,
          proof: EvidenceRecord) -> tuple[int, int, int, str | None]:
    """(bytes read, pattern words, other non-zero words, why the cleanup is not proven or None).

    The cleanup (zero-fill and verify of what the fresh context read) passes the barrier's own
    check (:func:`.barrier.check_verify`: control, zero words, coverage, every usable byte
    explained), its figures in ``proof``.
    """
    from dra_constructs.agent.barrier import BarrierFailure, check_verify, memory_figures, record_verify

    memory_figures(proof, deps.nvml.memory(device))  # before the fresh context: what the cleanup must cover
    session = deps.scrubber.open(device, deps.config.fill_timeout_s)
    try:
        if not isinstance(session, CanarySession):
            raise BackendError("selftest", f"the {type(session).__name__} backend serves no residue canary")
        read, found, other = session.read_residue(pattern)
        fill = session.fill()
        result = session.verify()
    finally:
        session.close()
    proof.bytes_total, proof.bytes_free, proof.bytes_zeroed = fill.bytes_total, fill.bytes_free, fill.bytes_zeroed
    if proof.bytes_free_before_context is not None:
        proof.bytes_context = max(0, proof.bytes_free_before_context - fill.bytes_free)
    record_verify(proof, fill.bytes_free, fill.bytes_total, result)
    try:
        check_verify(proof, fill.bytes_zeroed, result, deps.config.coverage_threshold)
    except BarrierFailure as failure:
        return read, found, other, str(failure)
    return read, found, other, None


def _report(deps: BarrierDeps, device: DeviceInfo, record: EvidenceRecord, figures: Selftest, clock: Any) -> None:
    deps.evidence.write(record)
    if deps.metrics is not None:
        deps.metrics.selftest_runs.labels(figures.verdict).inc()
        value = {"clean": 0, "residue": 1}.get(figures.verdict, -1)
        deps.metrics.selftest_residue.labels(figures.model, figures.driver_version).set(value)
    known = _UNKNOWN not in (figures.model, figures.driver_version)
    if figures.verdict != "inconclusive" and known:
        _store(deps, _key(figures.model, figures.driver_version),
               {"verdict": figures.verdict, "device": device.name, "uuid": device.uuid, "at": record.started_at})
    if figures.verdict == "clean":
        _LOG.info("residue canary on %s (%s, driver %s): clean", device.name, figures.model, figures.driver_version)
        return
    _switch(deps, f"{figures.verdict} on {device.name}: {record.reason}")
    reason = "ResidueCanaryFailed" if figures.verdict == "residue" else "ResidueCanaryInconclusive"
    deps.guard.event(device.name, reason, f"residue canary {figures.verdict} ({figures.model}, driver "
                     f"{figures.driver_version}): {record.reason}; the node now treats scrub-on-free as off "
                     "(fill-and-verify is the only scrub)", clock)


def _groups(deps: BarrierDeps, devices: Iterable[DeviceInfo]) -> dict[tuple[str, str], list[DeviceInfo]]:
    groups: dict[tuple[str, str], list[DeviceInfo]] = {}
    for device in sorted(devices, key=lambda d: (d.is_mig, d.name)):  # whole GPUs first
        groups.setdefault(identity(deps, device), []).append(device)
    return groups


def _choose(deps: BarrierDeps, members: list[DeviceInfo], claimed: Callable[[str], bool],
            sanitized: bool = False) -> tuple[DeviceInfo | None, list[str]]:
    reasons: list[str] = []
    for device in members:
        refused = why_not(deps, device, claimed, sanitized)
        if refused is None:
            return device, reasons
        reasons.append(f"{device.name}: {refused}")
    return None, reasons


def finish(barrier: Barrier, device: DeviceInfo) -> None:
    """A canary that could not prove its cleanup left the device in ``guard``: the whole barrier."""
    if barrier.deps.store.load(device.name, device.uuid).phase is not Phase.CLEAN:
        barrier.recover(device)


def at_start(barrier: Barrier, devices: Iterable[DeviceInfo], claimed: Callable[[str], bool]) -> list[EvidenceRecord]:
    """The agent's start: one canary per (GPU model, driver version) without a stored verdict, on a
    clean, unclaimed device (whole GPUs first); a pair without one is skipped with the reason logged."""
    deps = barrier.deps
    if not deps.config.selftest_at_start:
        return []
    stored = _stored(deps)
    records = []
    static = [d for d in devices if not d.dynamic]  # DynamicMIG: on demand only (canary_mig)
    for (model, driver), members in _groups(deps, static).items():
        if _key(model, driver) in stored:
            continue
        chosen, reasons = _choose(deps, members, claimed)
        if chosen is None:
            _LOG.warning("residue canary for %s, driver %s skipped: no clean, unclaimed device (%s)", model, driver,
                         "; ".join(reasons) or "none")
            continue
        try:
            records.append(run_selftest(deps, chosen, "agent-start", claimed))
        except DraConstructsError as error:  # taken between the check and the lock
            _LOG.warning("residue canary for %s, driver %s skipped: %s", model, driver, error)
            continue
        except Exception:  # never abort the agent's start; the device stays guarded
            _LOG.exception("residue canary for %s, driver %s failed on %s: the whole barrier runs on it",
                           model, driver, chosen.name)
        finish(barrier, chosen)
    return records


def on_demand(barrier: Barrier, devices: Iterable[DeviceInfo]) -> list[EvidenceRecord]:
    """``dra-sanitizer selftest`` without ``--device``: one canary per (GPU model, driver version)
    present, stored verdicts ignored; a :class:`DraConstructsError` if no group has a usable device."""
    records, skipped = [], []
    for (model, driver), members in _groups(barrier.deps, devices).items():
        chosen, reasons = _choose(barrier.deps, members, lambda _name: False, sanitized=True)
        if chosen is None:
            skipped.append(f"{model}, driver {driver}: {'; '.join(reasons) or 'no device'}")
            continue
        records.append(run_selftest(barrier.deps, chosen, "selftest", sanitized=True))
        finish(barrier, chosen)
    for line in skipped:
        _LOG.warning("residue canary skipped for %s", line)
    if not records:
        raise DraConstructsError("selftest", "--device", None, "no clean, unclaimed device on this node: "
                                 + (" | ".join(skipped) or "no devices"),
                                 "wait for a device to be released clean (dra-sanitizer status), then run again")
    return records
