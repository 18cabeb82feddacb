"""CUDA backend (``cuda.bindings`` from NVIDIA's ``cuda-bindings``; imported lazily, in a child).

Every scrub runs in a worker child process started with ``CUDA_VISIBLE_DEVICES=<uuid>`` (a
``GPU-...`` or ``MIG-...`` UUID) set before ``cuInit``, so the worker holds exactly one context
on exactly that device or MIG slice, and the context dies with the worker (a crashed or
killed agent leaves nothing behind that the next drain would not find). The parent talks to
the worker over JSON lines on stdin/stdout: ``fill``, ``verify``, ``close`` (and the residue
canary's ``pattern <hex>`` / ``residue <hex>``, :mod:`..canary`); the worker's
stderr goes to a file whose tail is quoted when the worker dies without an answer.

In the worker (:class:`CudaContext`): primary context on device 0, greedy ``cuMemAlloc`` of
nearly all free memory (largest 2 MiB-aligned chunk first, halving on
``CUDA_ERROR_OUT_OF_MEMORY``), ``cuMemsetD32Async`` to zero, then a device-side check with a
positive control: a random 64-bit marker is planted at the first and last word of every
allocation, one pass of the NVRTC-compiled kernel counts (16-byte loads) the words that are
neither zero nor the marker, the markers, and the words it read; the markers are then zeroed
and read back. A zero is trusted only if the kernel found every marker and read every byte.

The kernel is loaded as a cubin for the device's architecture (``nvrtcGetCUBIN``), never as
PTX of the installed NVRTC's newest ISA, which an older driver rejects
(``CUDA_ERROR_UNSUPPORTED_PTX_VERSION``). Only when NVRTC does not know the device's
architecture family (the driver is then newer than NVRTC) is it PTX for the newest
architecture NVRTC knows below the device's. Compiled images are cached under the agent's
state directory, keyed by NVRTC version, target and kernel source, written atomically.
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
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from dra_constructs.agent.backends.base import BackendError, FillResult, VerifyResult
from dra_constructs.agent.devices import DeviceInfo

__all__ = ["KERNEL_SOURCE", "CudaContext", "CudaScrubber", "kernel_target", "worker_main"]

_ALIGN = 2 << 20  # cuMemAlloc granularity on current GPUs
_COUNTERS = 32    # the kernel's three 64-bit counters, padded to keep the block's tail 16-byte aligned

#: The device-side check, one 16-byte load per element: out[0] += words equal to neither
#: ``expect`` nor ``marker``, out[1] += words equal to ``marker``, out[2] += words read.
KERNEL_SOURCE = r"""
extern "C" __global__ void count_words(const ulonglong2* __restrict__ p, unsigned long long n,
                                       unsigned long long expect, unsigned long long marker,
                                       unsigned long long* out) {
    unsigned long long other = 0, marks = 0, seen = 0;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const ulonglong2 w = p[i];
        marks += (w.x == marker) + (w.y == marker);
        other += (w.x != marker && w.x != expect) + (w.y != marker && w.y != expect);
        seen += 2;
    }
    for (int o = 16; o > 0; o >>= 1) {
        other += __shfl_down_sync(0xffffffffu, other, o);
        marks += __shfl_down_sync(0xffffffffu, marks, o);
        seen += __shfl_down_sync(0xffffffffu, seen, o);
    }
    if ((threadIdx.x & 31) == 0) {
        if (other) atomicAdd(out, other);
        if (marks) atomicAdd(out + 1, marks);
        if (seen) atomicAdd(out + 2, seen);
    }
}
"""

_NVRTC_MISSING = ("NVRTC (libnvrtc.so.12) cannot be loaded: {error}. The verify kernel is compiled on the "
                  "node: install nvidia-cuda-nvrtc-cu12 in the agent's environment (pip install "
                  "'dra-constructs[gpu]')")
_LIBCUDA_MISSING = ("the CUDA driver library (libcuda.so.1) cannot be loaded: {error}. The agent container "
                    "needs the NVIDIA driver's user-space libraries (NVIDIA container toolkit or CDI)")


def kernel_target(major: int, minor: int, supported: list[int]) -> tuple[str, int]:
    """("cubin" | "ptx", arch) to build the verify kernel for a device of compute capability major.minor.

    A cubin runs on its own family at the same or a higher minor version, so the newest
    NVRTC-supported ``sm_<major><m>`` with ``m <= minor`` is taken. If NVRTC knows none of the
    family, the driver is newer than NVRTC and accepts NVRTC's PTX ISA: PTX for the newest
    supported architecture below the device's.
    """
    arch = major * 10 + minor
    same_family = [a for a in supported if a // 10 == major and a <= arch]
    if same_family:
        return "cubin", max(same_family)
    older = [a for a in supported if a < arch]
    if not older:
        raise BackendError("nvrtcGetSupportedArchs", f"NVRTC supports no architecture at or below sm_{arch} "
                                                     f"(it knows {supported}): install a matching NVRTC", fatal=True)
    return "ptx", max(older)


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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
        self.cache = ptx_cache
        cu = driver
        try:
            init = cu.cuInit(0)
        except (RuntimeError, OSError) as error:  # cuda-bindings could not dlopen libcuda.so.1
            raise BackendError("cuInit", _LIBCUDA_MISSING.format(error=error), fatal=True) from error
        self._check("cuInit", init)
        self.device = self._check("cuDeviceGet", cu.cuDeviceGet(0))
        self.context = self._check("cuDevicePrimaryCtxRetain", cu.cuDevicePrimaryCtxRetain(self.device))
        self._check("cuCtxSetCurrent", cu.cuCtxSetCurrent(self.context))
        self.stream = self._check("cuStreamCreate", cu.cuStreamCreate(0))
        attr = cu.CUdevice_attribute
        self.sms = int(self._check("cuDeviceGetAttribute", cu.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, self.device)))
        major = int(self._check("cuDeviceGetAttribute", cu.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.device)))
        minor = int(self._check("cuDeviceGetAttribute", cu.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.device)))
        # Load the kernel and the counters before the fill, so neither competes with it. The
        # counters get a whole 2 MiB block of their own: a small allocation would share a page
        # whose other bytes (maybe the last tenant's) nobody fills; this block is filled and
        # verified with the rest (its first 32 bytes, the counters, are read back by the host).
        self.image_kind, self.image_arch, image = self._kernel_image(major, minor, ptx_cache)
        self.module = self._check("cuModuleLoadData", cu.cuModuleLoadData(image))
        self.kernel = self._check("cuModuleGetFunction", cu.cuModuleGetFunction(self.module, b"count_words"))
        free, total = self.mem_info()
        self.free_at_open = free
        self.total = total
        self.counter = self._check("cuMemAlloc", cu.cuMemAlloc(_ALIGN))

    # --- helpers ----------------------------------------------------------------------------

    def _check(self, op: str, result: Any) -> Any:
        err, *rest = result if isinstance(result, tuple) else (result,)
        if err != self.cu.CUresult.CUDA_SUCCESS:
            _, name = self.cu.cuGetErrorName(err)
            text = name.decode() if isinstance(name, bytes) else str(name)
            raise BackendError(op, text if text and text != "None" else str(err))
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else tuple(rest)

    def _nvrtc_call(self, op: str, result: Any) -> Any:
        err, *rest = result
        if err != self.nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise BackendError(op, str(err))
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else tuple(rest)

    def _kernel_image(self, major: int, minor: int, cache: str | None) -> tuple[str, int, bytes]:
        """(kind, arch, image) of the verify kernel for this device: cached, or compiled now."""
        nv = self.nvrtc
        try:
            version = self._nvrtc_call("nvrtcVersion", nv.nvrtcVersion())
            supported = list(self._nvrtc_call("nvrtcGetSupportedArchs", nv.nvrtcGetSupportedArchs()))
        except BackendError:
            raise
        except Exception as error:  # RuntimeError / cuda.pathfinder's DynamicLibNotFoundError
            raise BackendError("load NVRTC", _NVRTC_MISSING.format(error=f"{type(error).__name__}: {error}"),
                               fatal=True) from error
        kind, arch = kernel_target(major, minor, supported)
        key = hashlib.sha256(KERNEL_SOURCE.encode()).hexdigest()[:16]
        name = f"count_words-sm{arch}-nvrtc{version[0]}.{version[1]}-{key}.{kind}"
        path = Path(cache) / name if cache else None
        if path is not None and path.is_file():
            return kind, arch, path.read_bytes()
        image = self._compile(kind, arch)
        if path is not None:
            with contextlib.suppress(OSError):  # a read-only cache only costs a compile next time
                _write_atomically(path, image)
        return kind, arch, image

    def _compile(self, kind: str, arch: int) -> bytes:
        nv = self.nvrtc
        prog = self._nvrtc_call("nvrtcCreateProgram",
                                nv.nvrtcCreateProgram(KERNEL_SOURCE.encode(), b"count_words.cu", 0, [], []))
        try:
            target = f"sm_{arch}" if kind == "cubin" else f"compute_{arch}"
            options = [f"--gpu-architecture={target}".encode()]
            err, = nv.nvrtcCompileProgram(prog, len(options), options)
            if err != nv.nvrtcResult.NVRTC_SUCCESS:
                size = self._nvrtc_call("nvrtcGetProgramLogSize", nv.nvrtcGetProgramLogSize(prog))
                log = b" " * size
                nv.nvrtcGetProgramLog(prog, log)
                raise BackendError("nvrtcCompileProgram", log.decode(errors="replace").strip())
            if kind == "cubin":
                size = self._nvrtc_call("nvrtcGetCUBINSize", nv.nvrtcGetCUBINSize(prog))
                image = b" " * size
                self._nvrtc_call("nvrtcGetCUBIN", nv.nvrtcGetCUBIN(prog, image))
            else:
                size = self._nvrtc_call("nvrtcGetPTXSize", nv.nvrtcGetPTXSize(prog))
                image = b" " * size
                self._nvrtc_call("nvrtcGetPTX", nv.nvrtcGetPTX(prog, image))
            return bytes(image)
        finally:
            nv.nvrtcDestroyProgram(prog)

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

    @property
    def bytes_filled(self) -> int:
        """What :meth:`fill_zero` zeroes: every allocation and the counter block."""
        return sum(size for _, size in self.allocations) + _ALIGN

    def memset(self, value32: int) -> float:
        """Set every allocated byte (32-bit pattern); returns seconds (launch to sync)."""
        start = time.perf_counter()
        for ptr, size in self.allocations:
            self._check("cuMemsetD32Async", self.cu.cuMemsetD32Async(ptr, value32, size // 4, self.stream))
        self.sync()
        return time.perf_counter() - start

    def fill_zero(self) -> float:
        """Zero every allocation and the counter block; returns the memset seconds."""
        start = time.perf_counter()
        self._check("cuMemsetD32Async", self.cu.cuMemsetD32Async(self.counter, 0, _ALIGN // 4, self.stream))
        for ptr, size in self.allocations:
            self._check("cuMemsetD32Async", self.cu.cuMemsetD32Async(ptr, 0, size // 4, self.stream))
        self.sync()
        return time.perf_counter() - start

    def count(self, expect: int, marker: int, counter_block: bool = False) -> tuple[int, int, int, float]:
        """One kernel pass over every allocation (and the counter block's tail): (words neither
        ``expect`` nor ``marker``, words equal to ``marker``, words read, seconds)."""
        cu = self.cu
        start = time.perf_counter()
        self._check("cuMemsetD8Async", cu.cuMemsetD8Async(self.counter, 0, _COUNTERS, self.stream))
        types = (ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_ulonglong, ctypes.c_ulonglong, ctypes.c_void_p)
        blocks = [(int(ptr), size) for ptr, size in self.allocations]
        if counter_block:
            blocks.append((int(self.counter) + _COUNTERS, _ALIGN - _COUNTERS))
        for ptr, size in blocks:
            args = (ptr, size // 16, expect, marker, int(self.counter))
            self._check("cuLaunchKernel", cu.cuLaunchKernel(
                self.kernel, self.sms * 8, 1, 1, 256, 1, 1, 0, self.stream, (args, types), 0))
        host = (ctypes.c_ulonglong * 3)()
        self._check("cuMemcpyDtoHAsync", cu.cuMemcpyDtoHAsync(ctypes.addressof(host), self.counter, 24, self.stream))
        self.sync()
        return int(host[0]), int(host[1]), int(host[2]), time.perf_counter() - start

    def _marker_spots(self) -> list[int]:
        spots: list[int] = []
        for ptr, size in self.allocations:
            spots.extend({int(ptr), int(ptr) + size - 8})
        return spots

    def verify_zero(self) -> dict[str, Any]:
        """The verify with its positive control (see the module docstring); figures for the parent."""
        cu = self.cu
        marker = int.from_bytes(os.urandom(8), "little") | 1  # never 0; unknown to any tenant
        spots = self._marker_spots()
        for spot in spots:
            self._check("cuMemsetD32Async", cu.cuMemsetD32Async(spot, marker & 0xFFFFFFFF, 1, self.stream))
            self._check("cuMemsetD32Async", cu.cuMemsetD32Async(spot + 4, marker >> 32, 1, self.stream))
        self.sync()
        other, found, words, seconds = self.count(0, marker, counter_block=True)
        for spot in spots:  # un-plant, and prove it by reading the words back
            self._check("cuMemsetD8Async", cu.cuMemsetD8Async(spot, 0, 8, self.stream))
        self._check("cuMemsetD8Async", cu.cuMemsetD8Async(self.counter, 0, _COUNTERS, self.stream))
        back = ctypes.c_ulonglong(0)
        left = 0
        self.sync()
        for spot in [*spots, *range(int(self.counter), int(self.counter) + _COUNTERS, 8)]:
            self._check("cuMemcpyDtoH", cu.cuMemcpyDtoH(ctypes.addressof(back), spot, 8))
            left += back.value != 0
        return {"bytes_verified": words * 8 + _COUNTERS, "nonzero_words": other + left, "seconds": seconds,
                "control_planted": len(spots), "control_found": found}

    def count_words(self, value64: int, match: bool) -> tuple[int, float]:
        """Count 64-bit words equal to (``match``) or different from ``value64``, on the device."""
        if match:
            _, found, _, seconds = self.count(0, value64)
            return found, seconds
        other, found, _, seconds = self.count(value64, value64 ^ 1)
        return other + found, seconds

    def release(self) -> None:
        """Free every allocation and drop the primary context."""
        cu = self.cu
        for ptr, _ in self.allocations:
            cu.cuMemFree(ptr)
        self.allocations.clear()
        cu.cuMemFree(self.counter)
        cu.cuDevicePrimaryCtxRelease(self.device)


def worker_main(stdin: IO[str] | None = None, stdout: IO[str] | None = None) -> int:
    """The worker child: one context, then ``fill`` / ``verify`` / ``close`` commands.

    Every failure, expected or not, is answered as ``{"event": "error", ...}`` naming the call
    and the cause, so the parent's quarantine reason says what went wrong.
    """
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout

    def say(**fields: Any) -> None:
        stdout.write(json.dumps(fields) + "\n")
        stdout.flush()

    op = "cuInit"
    try:
        ctx = CudaContext(os.environ.get("DRA_SANITIZER_PTX_CACHE"))
        say(event="ready", pid=os.getpid(), free=ctx.free_at_open, total=ctx.total,
            kernel=f"{ctx.image_kind}:sm_{ctx.image_arch}")
        for line in stdin:
            op = command = line.strip()
            if command == "fill":
                start = time.perf_counter()
                ctx.allocate_all()
                memset_s = ctx.fill_zero()
                say(event="filled", bytes_zeroed=ctx.bytes_filled, bytes_free=ctx.free_at_open, bytes_total=ctx.total,
                    seconds=time.perf_counter() - start, memset_seconds=memset_s)
            elif command == "verify":
                say(event="verified", **ctx.verify_zero())
            elif command.startswith("pattern "):  # canary: fill with a pattern, then exit like a tenant
                ctx.allocate_all()
                value = int(command.split()[1], 16)
                seconds = ctx.memset(value & 0xFFFFFFFF)
                say(event="patterned", bytes_written=ctx.bytes_filled - _ALIGN, seconds=seconds)
                os._exit(0)  # no cuMemFree, no context release: the driver frees it at process exit
            elif command.startswith("residue "):  # canary: what of the pattern a fresh context sees
                ctx.allocate_all()
                other, found, words, seconds = ctx.count(0, int(command.split()[1], 16))
                say(event="residue", bytes_read=words * 8, pattern_words=found, other_words=other, seconds=seconds)
            elif command == "close":
                ctx.release()
                say(event="closed")
                return 0
        return 0
    except BackendError as error:
        say(event="error", op=error.op, message=str(error).partition(": ")[2] or str(error), fatal=error.fatal)
        return 1
    except Exception as error:  # a bug or an unexpected library error: still a named answer
        say(event="error", op=op, message=f"{type(error).__name__}: {error}", fatal=False)
        return 1


class _WorkerSession:
    """Parent side of one worker: the ScrubSession the barrier drives."""

    #: How errors name the child (the HIP worker of :mod:`.amd_hip` reuses this class).
    worker_name = "CUDA worker"

    def __init__(self, device: DeviceInfo, timeout_s: float, python: str, ptx_cache: str | None,
                 slot: threading.Semaphore | None = None) -> None:
        import dra_constructs

        root = str(Path(dra_constructs.__file__).resolve().parent.parent)  # src dir or the .pyz
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": device.cuda_visible_devices,
               "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "PYTHONPATH": root}
        if ptx_cache:
            env["DRA_SANITIZER_PTX_CACHE"] = ptx_cache
        self._start("dra_constructs.agent.backends.cuda", env, python, timeout_s, slot, "cuCtxCreate")

    def _start(self, module: str, env: dict[str, str], python: str, timeout_s: float,
               slot: threading.Semaphore | None, ready_op: str) -> None:
        """Start ``module``'s ``worker_main`` in a child and read its ready line (free, total, kernel)."""
        self._timeout = timeout_s
        self._slot = slot
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - read on failure, closed in close()
        self.kernel: str | None = None
        try:
            self._proc = subprocess.Popen(
                [python, "-c", f"from {module} import worker_main as m; raise SystemExit(m())"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=env,
            )
        except OSError as error:
            self._release_slot()
            self._stderr.close()
            raise BackendError(f"start {self.worker_name}", f"{python}: {error}", fatal=True) from error
        try:
            ready = self._read(ready_op)
        except BaseException:
            self.close()
            raise
        self.free = int(ready["free"])
        self.total = int(ready["total"])
        self.kernel = ready.get("kernel")

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _stderr_tail(self, limit: int = 600) -> str:
        with contextlib.suppress(OSError, ValueError):
            self._stderr.seek(0)
            text = self._stderr.read().decode(errors="replace").strip()
            lines = [line for line in text.splitlines() if line.strip()]
            return " | ".join(lines[-4:])[-limit:]
        return ""

    def _read(self, op: str) -> dict[str, Any]:
        assert self._proc.stdout is not None
        deadline = time.monotonic() + self._timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise BackendError(op, f"{self.worker_name} gave no answer within {self._timeout:.0f}s")
            readable, _, _ = select.select([self._proc.stdout], [], [], left)
            if readable:
                break
        line = self._proc.stdout.readline()
        if not line:
            code = self._proc.wait(timeout=5)
            tail = self._stderr_tail()
            raise BackendError(op, f"{self.worker_name} exited with code {code}" + (f": {tail}" if tail else ""))
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
            raise BackendError(command, f"{self.worker_name} is gone: {error}") from error

    def fill(self) -> FillResult:
        self._send("fill")
        m = self._read("fill")
        return FillResult(int(m["bytes_total"]), int(m["bytes_free"]), int(m["bytes_zeroed"]), float(m["seconds"]),
                          memset_seconds=float(m["memset_seconds"]))

    def verify(self) -> VerifyResult:
        self._send("verify")
        m = self._read("verify")
        return VerifyResult(int(m["bytes_verified"]), int(m["nonzero_words"]), float(m["seconds"]),
                            control_planted=int(m["control_planted"]), control_found=int(m["control_found"]))

    def write_pattern(self, pattern: int) -> int:
        """Canary: allocate nearly all free memory, set it to ``pattern`` (both 32-bit halves
        equal), then the worker exits without freeing (as a tenant does); bytes written."""
        self._send(f"pattern {pattern:016x}")
        written = int(self._read("pattern")["bytes_written"])
        try:
            self._proc.wait(timeout=self._timeout)
        except subprocess.TimeoutExpired as error:
            raise BackendError("pattern", f"{self.worker_name} did not exit within {self._timeout:.0f}s") from error
        return written

    def read_residue(self, pattern: int) -> tuple[int, int, int]:
        """Canary: (bytes read, words equal to ``pattern``, other non-zero words) in a fresh context."""
        self._send(f"residue {pattern:016x}")
        m = self._read("residue")
        return int(m["bytes_read"]), int(m["pattern_words"]), int(m["other_words"])

    def _release_slot(self) -> None:
        slot, self._slot = self._slot, None
        if slot is not None:
            slot.release()

    def close(self) -> None:
        if self._proc.poll() is None:
            with contextlib.suppress(BackendError, ValueError):
                self._send("close")
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout, self._stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._release_slot()


class CudaScrubber:
    """MemoryScrubber that runs one CUDA worker per scrub, on exactly one device or MIG slice.

    At most ``max_workers`` workers live at once (each holds a Python interpreter, the CUDA
    libraries and a context: 110-160 MB of host memory); a barrier waits for a free slot with
    its device still guarded.
    """

    def __init__(self, python: str | None = None, ptx_cache: str | None = None,
                 max_workers: int | None = None) -> None:
        self._python = python or sys.executable
        self._ptx_cache = ptx_cache
        self.max_workers = max_workers
        self._slots = threading.BoundedSemaphore(max_workers) if max_workers else None

    def open(self, device: DeviceInfo, timeout_s: float) -> _WorkerSession:
        if self._slots is not None:
            self._slots.acquire()
        return _WorkerSession(device, timeout_s, self._python, self._ptx_cache, self._slots)
