"""CUDA backend (``cuda.bindings`` from NVIDIA's ``cuda-bindings``; imported lazily, in a child).

Every scrub runs in a worker child process started with ``CUDA_VISIBLE_DEVICES=<uuid>`` (a
``GPU-...`` or ``MIG-...`` UUID) set before ``cuInit``, so the worker holds exactly one context
on exactly that device or MIG slice, and the context dies with the worker (a crashed or
killed agent leaves nothing behind that the next drain would not find). The parent talks to
the worker over JSON lines on stdin/stdout: ``fill``, ``verify``, ``close``.

In the worker (:class:`CudaContext`): primary context on device 0, greedy ``cuMemAlloc`` of
nearly all free memory (largest 2 MiB-aligned chunk first, halving on
``CUDA_ERROR_OUT_OF_MEMORY``), ``cuMemsetD32Async`` to zero, then a device-side check: an
NVRTC-compiled kernel that counts non-zero 64-bit words, so only 8 bytes come back to the host.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from ..devices import DeviceInfo
from .base import BackendError, FillResult, VerifyResult

__all__ = ["KERNEL_SOURCE", "CudaContext", "CudaScrubber", "worker_main"]

_ALIGN = 2 << 20  # cuMemAlloc granularity on current GPUs

#: The device-side check: count 64-bit words that differ from (match=0) or equal (match=1) a value.
KERNEL_SOURCE = r"""
extern "C" __global__ void count_words(const unsigned long long* __restrict__ p, unsigned long long n,
                                       unsigned long long value, int match, unsigned long long* out) {
    unsigned long long c = 0;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const unsigned long long w = p[i];
        c += match ? (w == value) : (w != value);
    }
    for (int o = 16; o > 0; o >>= 1) c += __shfl_down_sync(0xffffffffu, c, o);
    if ((threadIdx.x & 31) == 0 && c) atomicAdd(out, c);
}
"""


class CudaContext:
    """One primary context on CUDA device 0 of this process (set CUDA_VISIBLE_DEVICES first)."""

    def __init__(self, ptx_cache: str | None = None) -> None:
        try:
            from cuda.bindings import driver, nvrtc
        except ImportError as error:
            raise BackendError("import cuda.bindings", "cuda-bindings is not installed (extra `gpu`)",
                               fatal=True) from error
        self.cu: Any = driver
        self.nvrtc: Any = nvrtc
        self.allocations: list[tuple[Any, int]] = []
        cu = driver
        self._check("cuInit", cu.cuInit(0))
        self.device = self._check("cuDeviceGet", cu.cuDeviceGet(0))
        self.context = self._check("cuDevicePrimaryCtxRetain", cu.cuDevicePrimaryCtxRetain(self.device))
        self._check("cuCtxSetCurrent", cu.cuCtxSetCurrent(self.context))
        self.stream = self._check("cuStreamCreate", cu.cuStreamCreate(0))
        attr = cu.CUdevice_attribute
        self.sms = int(self._check("cuDeviceGetAttribute", cu.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, self.device)))
        major = self._check("cuDeviceGetAttribute", cu.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.device))
        minor = self._check("cuDeviceGetAttribute", cu.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.device))
        # Load the kernel and the 8-byte counter before the fill, so neither competes with it.
        self.module = self._check("cuModuleLoadData", cu.cuModuleLoadData(self._ptx(f"{major}{minor}", ptx_cache)))
        self.kernel = self._check("cuModuleGetFunction", cu.cuModuleGetFunction(self.module, b"count_words"))
        self.counter = self._check("cuMemAlloc", cu.cuMemAlloc(8))
        free, total = self.mem_info()
        self.free_at_open = free
        self.total = total

    # --- helpers ----------------------------------------------------------------------------

    def _check(self, op: str, result: Any) -> Any:
        err, *rest = result if isinstance(result, tuple) else (result,)
        if err != self.cu.CUresult.CUDA_SUCCESS:
            _, name = self.cu.cuGetErrorName(err)
            raise BackendError(op, name.decode() if isinstance(name, bytes) else str(name))
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else tuple(rest)

    def _ptx(self, arch: str, cache: str | None) -> bytes:
        key = hashlib.sha256(KERNEL_SOURCE.encode()).hexdigest()[:16]
        path = Path(cache) / f"count_words-sm{arch}-{key}.ptx" if cache else None
        if path is not None and path.is_file():
            return path.read_bytes()
        nv = self.nvrtc

        def check(op: str, result: Any) -> Any:
            err, *rest = result
            if err != nv.nvrtcResult.NVRTC_SUCCESS:
                raise BackendError(op, str(err))
            return rest[0] if rest else None

        prog = check("nvrtcCreateProgram", nv.nvrtcCreateProgram(KERNEL_SOURCE.encode(), b"count_words.cu", 0, [], []))
        options = [f"--gpu-architecture=compute_{arch}".encode()]
        err, = nv.nvrtcCompileProgram(prog, len(options), options)
        if err != nv.nvrtcResult.NVRTC_SUCCESS:
            size = check("nvrtcGetProgramLogSize", nv.nvrtcGetProgramLogSize(prog))
            log = b" " * size
            nv.nvrtcGetProgramLog(prog, log)
            raise BackendError("nvrtcCompileProgram", log.decode(errors="replace"))
        size = check("nvrtcGetPTXSize", nv.nvrtcGetPTXSize(prog))
        ptx = b" " * size
        check("nvrtcGetPTX", nv.nvrtcGetPTX(prog, ptx))
        if path is not None:
            with contextlib.suppress(OSError):
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(ptx)
        return bytes(ptx)

    def mem_info(self) -> tuple[int, int]:
        """``cuMemGetInfo``: (free, total) bytes of this device / MIG slice."""
        free, total = self._check("cuMemGetInfo", self.cu.cuMemGetInfo())
        return int(free), int(total)

    def sync(self) -> None:
        self._check("cuStreamSynchronize", self.cu.cuStreamSynchronize(self.stream))

    # --- the work ---------------------------------------------------------------------------

    def allocate_all(self) -> int:
        """Allocate nearly all free memory: largest aligned chunk first, halve on OOM."""
        cu = self.cu
        oom = cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY
        chunk = self.mem_info()[0] // _ALIGN * _ALIGN
        while chunk >= _ALIGN:
            err, ptr = cu.cuMemAlloc(chunk)
            if err == cu.CUresult.CUDA_SUCCESS:
                self.allocations.append((ptr, chunk))
                chunk = self.mem_info()[0] // _ALIGN * _ALIGN
            elif err == oom:
                chunk = chunk // 2 // _ALIGN * _ALIGN
            else:
                self._check("cuMemAlloc", (err,))
        return sum(size for _, size in self.allocations)

    def memset(self, value32: int) -> float:
        """Set every allocated byte (32-bit pattern); returns seconds (launch to sync)."""
        start = time.perf_counter()
        for ptr, size in self.allocations:
            self._check("cuMemsetD32Async", self.cu.cuMemsetD32Async(ptr, value32, size // 4, self.stream))
        self.sync()
        return time.perf_counter() - start

    def count_words(self, value64: int, match: bool) -> tuple[int, float]:
        """Count 64-bit words equal to (``match``) or different from ``value64``, on the device."""
        cu = self.cu
        start = time.perf_counter()
        self._check("cuMemsetD8Async", cu.cuMemsetD8Async(self.counter, 0, 8, self.stream))
        types = (ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_ulonglong, ctypes.c_int, ctypes.c_void_p)
        for ptr, size in self.allocations:
            args = (int(ptr), size // 8, value64, 1 if match else 0, int(self.counter))
            self._check("cuLaunchKernel", cu.cuLaunchKernel(
                self.kernel, self.sms * 8, 1, 1, 256, 1, 1, 0, self.stream, (args, types), 0))
        host = ctypes.c_ulonglong(0)
        self._check("cuMemcpyDtoHAsync", cu.cuMemcpyDtoHAsync(ctypes.addressof(host), self.counter, 8, self.stream))
        self.sync()
        return int(host.value), time.perf_counter() - start

    def release(self) -> None:
        """Free every allocation and drop the primary context."""
        cu = self.cu
        for ptr, _ in self.allocations:
            cu.cuMemFree(ptr)
        self.allocations.clear()
        cu.cuDevicePrimaryCtxRelease(self.device)


def worker_main(stdin: IO[str] | None = None, stdout: IO[str] | None = None) -> int:
    """The worker child: one context, then ``fill`` / ``verify`` / ``close`` commands."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout

    def say(**fields: Any) -> None:
        stdout.write(json.dumps(fields) + "\n")
        stdout.flush()

    try:
        ctx = CudaContext(os.environ.get("DRA_SANITIZER_PTX_CACHE"))
        say(event="ready", pid=os.getpid(), free=ctx.free_at_open, total=ctx.total)
        for line in stdin:
            command = line.strip()
            if command == "fill":
                start = time.perf_counter()
                zeroed = ctx.allocate_all()
                memset_s = ctx.memset(0)
                say(event="filled", bytes_zeroed=zeroed, bytes_free=ctx.free_at_open, bytes_total=ctx.total,
                    seconds=time.perf_counter() - start, memset_seconds=memset_s)
            elif command == "verify":
                nonzero, seconds = ctx.count_words(0, match=False)
                say(event="verified", bytes_verified=sum(s for _, s in ctx.allocations),
                    nonzero_words=nonzero, seconds=seconds)
            elif command == "close":
                ctx.release()
                say(event="closed")
                return 0
        return 0
    except BackendError as error:
        say(event="error", op=error.op, message=str(error), fatal=error.fatal)
        return 1


class _WorkerSession:
    """Parent side of one worker: the ScrubSession the barrier drives."""

    def __init__(self, device: DeviceInfo, timeout_s: float, python: str, ptx_cache: str | None) -> None:
        import dra_constructs

        root = str(Path(dra_constructs.__file__).resolve().parent.parent)  # src dir or the .pyz
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": device.cuda_visible_devices,
               "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "PYTHONPATH": root}
        if ptx_cache:
            env["DRA_SANITIZER_PTX_CACHE"] = ptx_cache
        self._timeout = timeout_s
        self._proc = subprocess.Popen(
            [python, "-c", "from dra_constructs.sanitizer.runtime.backends.cuda import worker_main as m; "
                           "raise SystemExit(m())"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )
        ready = self._read("cuCtxCreate")
        self.free = int(ready["free"])
        self.total = int(ready["total"])

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _read(self, op: str) -> dict[str, Any]:
        assert self._proc.stdout is not None
        deadline = time.monotonic() + self._timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise BackendError(op, f"CUDA worker gave no answer within {self._timeout:.0f}s")
            readable, _, _ = select.select([self._proc.stdout], [], [], left)
            if readable:
                break
        line = self._proc.stdout.readline()
        if not line:
            code = self._proc.wait(timeout=5)
            raise BackendError(op, f"CUDA worker exited with code {code}")
        message: dict[str, Any] = json.loads(line)
        if message.get("event") == "error":
            raise BackendError(str(message.get("op", op)), str(message.get("message")), bool(message.get("fatal")))
        return message

    def _send(self, command: str) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(command + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise BackendError(command, f"CUDA worker is gone: {error}") from error

    def fill(self) -> FillResult:
        self._send("fill")
        m = self._read("fill")
        return FillResult(int(m["bytes_total"]), int(m["bytes_free"]), int(m["bytes_zeroed"]), float(m["seconds"]))

    def verify(self) -> VerifyResult:
        self._send("verify")
        m = self._read("verify")
        return VerifyResult(int(m["bytes_verified"]), int(m["nonzero_words"]), float(m["seconds"]))

    def close(self) -> None:
        if self._proc.poll() is None:
            with contextlib.suppress(BackendError, ValueError):
                self._send("close")
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


class CudaScrubber:
    """MemoryScrubber that runs one CUDA worker per scrub, on exactly one device or MIG slice."""

    def __init__(self, python: str | None = None, ptx_cache: str | None = None) -> None:
        self._python = python or sys.executable
        self._ptx_cache = ptx_cache

    def open(self, device: DeviceInfo, timeout_s: float) -> _WorkerSession:
        return _WorkerSession(device, timeout_s, self._python, self._ptx_cache)
