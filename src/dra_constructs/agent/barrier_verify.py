"""The proof of a fill: memory before our context, the verify's coverage, and the check that it proves the fill.

The functions are shared with the canary's cleanup (:mod:`.canary`).
"""

from __future__ import annotations

from dra_constructs.agent.backends.base import BackendError, MemoryInfo, VerifyResult
from dra_constructs.agent.barrier_cycle import BarrierFailure, _BarrierBase, _Cycle
from dra_constructs.agent.config import CUDA_ALLOCATION_GRANULE
from dra_constructs.agent.evidence import EvidenceRecord

#: What a fill may leave unallocated: it allocates 2 MiB-aligned chunks until less than one is free
#: (``cuMemAlloc`` granularity on current GPUs; backends/cuda.py ``_ALIGN``).
FILL_SLACK_BYTES = CUDA_ALLOCATION_GRANULE


def memory_figures(record: EvidenceRecord, memory: MemoryInfo) -> int:
    """NVML's memory before a context: reserved, usable (total - reserved), free; returns the unaccounted bytes."""
    usable = memory.total - memory.reserved
    missing = max(0, usable - memory.free)
    record.bytes_reserved, record.bytes_usable = memory.reserved, usable
    record.bytes_free_before_context, record.bytes_unaccounted = memory.free, missing
    return missing


def record_verify(record: EvidenceRecord, bytes_free: int, bytes_total: int, result: VerifyResult) -> None:
    """Coverage against what the device holds for CUDA (NVML total - reserved), not free memory."""
    record.bytes_verified, record.nonzero_words = result.bytes_verified, result.nonzero_words
    record.control_planted, record.control_found = result.control_planted, result.control_found
    if result.seconds > 0:
        record.verify_bytes_per_s = result.bytes_verified / result.seconds
    usable = record.bytes_usable if record.bytes_usable is not None else bytes_total
    record.coverage = min(1.0, result.bytes_verified / usable) if usable else 0.0
    record.coverage_of_free = result.bytes_verified / bytes_free if bytes_free else 0.0
    record.coverage_of_total = result.bytes_verified / bytes_total if bytes_total else 0.0
    record.bytes_not_covered = max(0, bytes_total - result.bytes_verified)


def check_verify(record: EvidenceRecord, bytes_zeroed: int, result: VerifyResult, threshold: float) -> None:
    """The verify proves the fill: positive control, no non-zero word, every zeroed byte read, coverage of
    free memory at ``threshold``, every usable byte not verified explained (the barrier and the canary's
    cleanup alike). Raises :class:`BarrierFailure` with the reason."""
    if result.control_planted is not None and result.control_found != result.control_planted:
        raise BarrierFailure(f"verify positive control failed: the kernel counted {result.control_found} of "
                             f"{result.control_planted} planted marker words, so its zero count is not proof")
    if result.nonzero_words:
        raise BarrierFailure(f"verify found {result.nonzero_words} non-zero 64-bit words after the fill")
    if result.bytes_verified != bytes_zeroed:  # counted by the kernel itself, not echoed back
        raise BarrierFailure(f"the verify kernel read {result.bytes_verified} of {bytes_zeroed} zeroed bytes")
    if (record.coverage_of_free or 0.0) < threshold:
        raise BarrierFailure(f"coverage {record.coverage_of_free or 0.0:.4f} of free memory is below {threshold}")
    usable = record.bytes_usable
    if usable is not None:
        # Every usable byte not verified must be explained: our context, what was allowed as
        # unaccounted before it, and the fill's slack (less than one allocation granule).
        explained = (record.bytes_context or 0) + (record.bytes_unaccounted or 0) + FILL_SLACK_BYTES
        uncovered = max(0, usable - result.bytes_verified)
        if uncovered > explained:
            raise BarrierFailure(
                f"{uncovered} of {usable} usable bytes were not verified, more than our context "
                f"({record.bytes_context}), the allowed unaccounted memory ({record.bytes_unaccounted}) "
                f"and the fill's slack ({FILL_SLACK_BYTES}) explain")


class _VerifyMixin(_BarrierBase):
    """The barrier's memory checks around the fill."""

    def _check_unaccounted_memory(self, c: _Cycle) -> None:
        """Before our context: free must be total - reserved, less at most ``unaccounted_memory_bytes``.

        Memory that no listed process holds (a process in another PID namespace, a leaked
        allocation) is invisible to the process list and to the fill; it is exactly what the
        next tenant could read, so it fails the barrier. The allowance is absolute: half an
        allocation granule (1 MiB of CUDA's 2 MiB), so any allocation a hidden process holds exceeds it.
        """
        try:
            assert c.target is not None
            memory = self.deps.nvml.memory(c.target)
        except BackendError as error:
            if error.fatal:
                raise
            raise BarrierFailure(f"cannot read the device's memory before the fill: {error}") from error
        missing = memory_figures(c.record, memory)
        allowed = self.deps.config.unaccounted_allowance
        if missing > allowed:
            raise BarrierFailure(
                f"unaccounted memory: {missing} bytes of the device are in use although no process holds a "
                f"context (free {memory.free} of {memory.total}, driver-reserved {memory.reserved}, allowed "
                f"{allowed}: unaccounted_memory_bytes); a process NVML does not list (another PID namespace?) "
                f"holds memory the fill cannot reach")

    def _record_verify(self, c: _Cycle, bytes_free: int, bytes_total: int, result: VerifyResult) -> None:
        record_verify(c.record, bytes_free, bytes_total, result)

    def _check_verify(self, c: _Cycle, bytes_zeroed: int, result: VerifyResult) -> None:
        check_verify(c.record, bytes_zeroed, result, self.deps.config.coverage_threshold)
