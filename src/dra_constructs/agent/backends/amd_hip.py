"""HIP backend (``hip`` from AMD's ``hip-python``; imported lazily, in a child): zero-fill and verify.

Like the CUDA backend (:mod:`.cuda`), every scrub runs in a worker child process that holds
exactly one HIP context on exactly one device and dies with it; the parent drives it over JSON
lines (``fill``, ``verify``, ``close``), reusing the CUDA backend's parent side. The child is
started with ``ROCR_VISIBLE_DEVICES=<agent UUID>`` (from ``amdsmi_get_gpu_enumeration_info``
``hip_uuid``; without one it does not start: a bare ``hip_id`` ordinal cannot be checked), and refuses
to work unless HIP then sees exactly one device whose ``hipDeviceGetUuid`` matches.

Before the worker starts, :class:`HipScrubber` checks and sets ``enforce_isolation`` on the
device's partition and runs the cleaner shader there (:mod:`.amd_isolation`): memory zeroing
does not clear the LDS (LeftoverLocals, CVE-2023-4969). A failure there is a failed open: the
barrier quarantines.

In the worker (:class:`HipContext`): greedy ``hipMalloc`` of nearly all free memory (largest
2 MiB-aligned chunk first, halving on ``hipErrorOutOfMemory``), ``hipMemset`` to zero, then the
verify: a random 64-bit marker is written at the first and last word of every allocation, all
memory is read back with ``hipMemcpy`` (device to host, in 64 MiB chunks) and compared with
zero on the host; the markers must be read back where they were planted (the positive
control: a read path that returns zeros whatever the device holds fails it), then are zeroed and
read back once more. There is no device-side kernel: hip-python ships no compiler and
``libhiprtc`` is not part of every ROCm runtime image, so the read-back costs PCIe bandwidth
(docs/sanitizer-runtime.md) instead of a kernel launch.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from dra_constructs.agent.backends.amd_isolation import AmdIsolation
from dra_constructs.agent.backends.amd_smi import AmdFacts
from dra_constructs.agent.backends.base import BackendError
from dra_constructs.agent.backends.cuda import _WorkerSession
from dra_constructs.agent.devices import DeviceInfo

__all__ = ["HipContext", "HipScrubber", "worker_main"]

_ALIGN = 2 << 20
_CHUNK = 64 << 20
_LIBHIP_MISSING = ("the HIP runtime (libamdhip64.so) cannot be loaded: {error}. The agent container needs ROCm's "
                   "HIP runtime libraries (a ROCm base image, or the host's /opt/rocm/lib on LD_LIBRARY_PATH)")


class HipContext:
    """One HIP context on device 0 of this process (set ROCR_VISIBLE_DEVICES first)."""

    def __init__(self, expect_uuid: str | None = None) -> None:
        try:
            from hip import hip
        except ImportError as error:
            raise BackendError("import hip", "hip-python is not installed (extra `amd`)", fatal=True) from error
        self.hip: Any = hip
        self.allocations: list[tuple[int, int]] = []
        try:
            init = hip.hipInit(0)
        except RuntimeError as error:  # hip-python could not dlopen libamdhip64.so
            raise BackendError("hipInit", _LIBHIP_MISSING.format(error=error), fatal=True) from error
        self._check("hipInit", init)
        count = int(self._check("hipGetDeviceCount", hip.hipGetDeviceCount()))
        if count != 1:
            raise BackendError("hipGetDeviceCount", f"the worker sees {count} devices, not exactly the one it was "
                               "started for (ROCR_VISIBLE_DEVICES)", fatal=True)
        if expect_uuid:
            raw = self._check("hipDeviceGetUuid", hip.hipDeviceGetUuid(0))
            got = bytes(raw.bytes).rstrip(b"\0").decode("ascii", "replace")
            if f"GPU-{got}" != expect_uuid:
                raise BackendError("hipDeviceGetUuid", f"HIP device 0 is GPU-{got}, not {expect_uuid}", fatal=True)
        self._check("hipSetDevice", hip.hipSetDevice(0))
        self.free_at_open, self.total = self.mem_info()

    def _check(self, op: str, result: Any) -> Any:
        err, *rest = result if isinstance(result, tuple) else (result,)
        if err != self.hip.hipError_t.hipSuccess:
            raise BackendError(op, getattr(err, "name", str(err)))
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else tuple(rest)

    def mem_info(self) -> tuple[int, int]:
        """``hipMemGetInfo``: (free, total) bytes of this device."""
        free, total = self._check("hipMemGetInfo", self.hip.hipMemGetInfo())
        return int(free), int(total)

    def allocate_all(self) -> int:
        hip = self.hip
        chunk = self.mem_info()[0] // _ALIGN * _ALIGN
        while chunk >= _ALIGN:
            err, ptr = hip.hipMalloc(chunk)
            if err == hip.hipError_t.hipSuccess:
                self.allocations.append((int(ptr), chunk))
                chunk = self.mem_info()[0] // _ALIGN * _ALIGN
            elif err == hip.hipError_t.hipErrorOutOfMemory:
                chunk = chunk // 2 // _ALIGN * _ALIGN
            else:
                self._check("hipMalloc", (err,))
        return sum(size for _, size in self.allocations)

    def fill_zero(self) -> float:
        start = time.perf_counter()
        for ptr, size in self.allocations:
            self._check("hipMemset", self.hip.hipMemset(ptr, 0, size))
        self._check("hipDeviceSynchronize", self.hip.hipDeviceSynchronize())
        return time.perf_counter() - start

    def _to_host(self, buffer: bytearray, ptr: int, size: int) -> None:
        kind = self.hip.hipMemcpyKind.hipMemcpyDeviceToHost
        self._check("hipMemcpy", self.hip.hipMemcpy(buffer, ptr, size, kind))

    def _to_device(self, ptr: int, data: bytes) -> None:
        kind = self.hip.hipMemcpyKind.hipMemcpyHostToDevice
        self._check("hipMemcpy", self.hip.hipMemcpy(ptr, bytearray(data), len(data), kind))

    def verify_zero(self) -> dict[str, Any]:
        """Read every allocation back and count non-zero words, with the marker control (module docstring)."""
        marker = int.from_bytes(os.urandom(8), "little") | 1
        mark = marker.to_bytes(8, "little")
        spots = sorted({s for ptr, size in self.allocations for s in (ptr, ptr + size - 8)})
        for spot in spots:
            self._to_device(spot, mark)
        self._check("hipDeviceSynchronize", self.hip.hipDeviceSynchronize())
        start = time.perf_counter()
        host = bytearray(_CHUNK)
        zero = bytes(_CHUNK)
        nonzero = found = read = 0
        spot_set = set(spots)
        for ptr, size in self.allocations:
            for offset in range(0, size, _CHUNK):
                n = min(_CHUNK, size - offset)
                view = memoryview(host)[:n]
                self._to_host(host, ptr + offset, n)
                read += n
                base = ptr + offset
                for spot in (s for s in (ptr, ptr + size - 8) if base <= s < base + n):
                    if spot in spot_set and view[spot - base:spot - base + 8] == mark:
                        found += 1
                        view[spot - base:spot - base + 8] = bytes(8)
                if (host != zero) if n == _CHUNK else (host[:n] != zero[:n]):  # memcmp, no per-word loop
                    words = view.cast("Q")
                    nonzero += sum(1 for w in words if w)
        seconds = time.perf_counter() - start
        for spot in spots:  # un-plant, and prove it by reading the words back
            self._to_device(spot, bytes(8))
        back = bytearray(8)
        left = 0
        for spot in spots:
            self._to_host(back, spot, 8)
            left += back != bytes(8)
        return {"bytes_verified": read, "nonzero_words": nonzero + left, "seconds": seconds,
                "control_planted": len(spots), "control_found": found}

    def release(self) -> None:
        for ptr, _ in self.allocations:
            self.hip.hipFree(ptr)
        self.allocations.clear()


def worker_main(stdin: IO[str] | None = None, stdout: IO[str] | None = None) -> int:
    """The worker child: one HIP context, then ``fill`` / ``verify`` / ``close``; every failure is answered."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout

    def say(**fields: Any) -> None:
        stdout.write(json.dumps(fields) + "\n")
        stdout.flush()

    op = "hipInit"
    try:
        ctx = HipContext(os.environ.get("DRA_SANITIZER_HIP_UUID") or None)
        say(event="ready", pid=os.getpid(), free=ctx.free_at_open, total=ctx.total, kernel="host-readback")
        for line in stdin:
            op = command = line.strip()
            if command == "fill":
                start = time.perf_counter()
                ctx.allocate_all()
                memset_s = ctx.fill_zero()
                say(event="filled", bytes_zeroed=sum(s for _, s in ctx.allocations), bytes_free=ctx.free_at_open,
                    bytes_total=ctx.total, seconds=time.perf_counter() - start, memset_seconds=memset_s)
            elif command == "verify":
                say(event="verified", **ctx.verify_zero())
            elif command == "close":
                ctx.release()
                say(event="closed")
                return 0
            else:
                say(event="error", op=command, message="the HIP worker does not serve this command", fatal=False)
        return 0
    except BackendError as error:
        say(event="error", op=error.op, message=str(error).partition(": ")[2] or str(error), fatal=error.fatal)
        return 1
    except Exception as error:  # a bug or an unexpected library error: still a named answer
        say(event="error", op=op, message=f"{type(error).__name__}: {error}", fatal=False)
        return 1


class _HipSession(_WorkerSession):
    """Parent side of one HIP worker (the CUDA session's protocol, another child and environment)."""

    worker_name = "HIP worker"
    #: No residue canary on AMD (:mod:`..canary`): None opts out of its ``CanarySession`` protocol.
    write_pattern = None  # type: ignore[assignment]
    read_residue = None  # type: ignore[assignment]

    def __init__(self, device: DeviceInfo, facts: AmdFacts, timeout_s: float, python: str,
                 slot: threading.Semaphore | None, isolation: dict[str, object]) -> None:
        import dra_constructs

        root = os.path.dirname(os.path.dirname(os.path.abspath(dra_constructs.__file__)))
        env = {k: v for k, v in os.environ.items() if k not in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")}
        env["PYTHONPATH"] = root
        if facts.hip_uuid:
            env["ROCR_VISIBLE_DEVICES"] = facts.hip_uuid
            env["DRA_SANITIZER_HIP_UUID"] = facts.hip_uuid
        else:
            # A HIP ordinal alone (``hip_id``) cannot be checked from inside the worker: HIP numbers
            # the devices this process can open, in its own order, so an ordinal amd-smi counted
            # differently (devices hidden from the agent's container, another enumeration order)
            # fills and verifies another device while this one is released unproven. Fail closed.
            if slot is not None:
                slot.release()
            raise BackendError("amdsmi_get_gpu_enumeration_info", f"{device.name}: amd-smi gives no HIP UUID "
                               f"(hip_id {facts.hip_id}): the worker cannot be pinned to this device and proven to "
                               "be on it; upgrade amd-smi to one that reports hip_uuid", fatal=True)
        self.isolation = isolation
        self._start("dra_constructs.agent.backends.amd_hip", env, python, timeout_s, slot, "hipInit")


class HipScrubber:
    """MemoryScrubber for AMD devices: cleaner shader first, then one HIP worker per scrub.

    ``facts`` maps a device to where it is (:meth:`.amd_smi.AmdSmiDevices.facts`). ``cleaned``
    keeps, per device UUID, what the last cleaner-shader run saw (the attestation reads it).
    """

    def __init__(self, facts: Callable[[DeviceInfo], AmdFacts], isolation: AmdIsolation, python: str | None = None,
                 max_workers: int | None = None) -> None:
        self._facts = facts
        self.isolation = isolation
        self._python = python or sys.executable
        self.max_workers = max_workers
        self._slots = threading.BoundedSemaphore(max_workers) if max_workers else None
        self.cleaned: dict[str, dict[str, object]] = {}

    def open(self, device: DeviceInfo, timeout_s: float) -> _HipSession:
        facts = self._facts(device)
        seen = self.isolation.clean(facts.bdf, facts.partition)  # raises: the barrier quarantines
        seen["at"] = time.time()
        self.cleaned[device.uuid] = seen
        if self._slots is not None:
            self._slots.acquire()
        return _HipSession(device, facts, timeout_s, self._python, self._slots, seen)
