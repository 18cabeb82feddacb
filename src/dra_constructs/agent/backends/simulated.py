"""A simulated GPU node: devices whose memory really holds bytes, processes, contexts, faults.

What it models (and what the barrier is tested against):
- memory as a ``bytearray`` cut into allocation granules; a granule is owned by a process or
  free; freed memory keeps its bytes (scrub-on-free off) unless ``scrub_on_free`` is set;
- tenant processes that hold contexts and memory and obey SIGTERM (after a delay), ignore it,
  or never exit (D state, SIGKILL does nothing);
- compute modes: PROHIBITED refuses new contexts, EXCLUSIVE_PROCESS refuses a second one;
- the sanitizer's context as a worker process with its own PID that NVML lists;
- injectable faults at every call (:class:`FaultInjector`), including silent ones (a memset
  that skips a granule, an allocator that cannot reach part of the free memory);
- per-device virtual clocks, so grace periods cost no wall time;
- who owns each process: a ``/proc/<pid>/cgroup`` text in the kubelet's format (a pod's, the
  host's, or none: unreadable), read by the agent's real parser (:mod:`..owners`);
- MIG instances that can be destroyed and recreated at their placement (cold reset: a new
  UUID, the memory keeps its bytes), and DynamicMIG GPUs (``dynamic_mig``) whose every
  placement is a device sharing the GPU's memory slices, with instances that exist only
  between the DRA driver's prepare and unprepare (:meth:`SimulatedNode.prepare`); with
  ``whole_gpu`` (Hopper and newer) also the whole GPU ``gpu-N`` beside the placements, and MIG
  mode toggled as the driver does: on at the first instance, off when the last one goes
  (dra-driver-nvidia-gpu ``maybeDisableMigMode``); ``gpu-N`` is a CUDA device only while it is off.
The hardware's own view (:meth:`SimulatedNode.audit`) decides whether a release was dirty.

Idealizations, stated (docs/sanitizer-runtime.md "What the simulation does not model"):
- the sanitizer's own context memory is *not* zeroed by fiat any more: its granules keep
  whatever the previous tenant left (scrub-on-free off), exactly the part no user-space fill
  reaches. The audit reports that residue apart (``uncovered_bytes``) instead of hiding it, and
  a release is dirty only for residue the fill should have reached or for a live context;
- on-chip state (L2, shared memory, registers) and RM-reserved memory are not modelled;
- a process hidden from NVML (no hostPID) is modelled only by tests that patch NVML.
"""

from __future__ import annotations

import random
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace

from dra_constructs.agent.backends.base import (
    BackendError,
    ComputeMode,
    EnumerationError,
    EnumerationFailed,
    EnumerationResult,
    FillResult,
    MemoryInfo,
    VerifyResult,
)
from dra_constructs.agent.backends.simhealth import SimHealth
from dra_constructs.agent.clock import VirtualClock
from dra_constructs.agent.config import SimulatedBackendSettings
from dra_constructs.agent.devices import DeviceInfo, gpu_device_name, mig_device_name

__all__ = [
    "FAULT_OPS",
    "HOST_CGROUP",
    "AuditResult",
    "FaultInjector",
    "SimulatedCrash",
    "SimulatedNode",
    "kubelet_cgroup",
]

#: Every fault the simulated node can inject, by the call it hits.
FAULT_OPS: tuple[str, ...] = (
    "nvml.processes",        # transient NVML error while listing processes
    "nvml.gpu_lost",         # NVML_ERROR_GPU_IS_LOST (fatal)
    "nvml.set_compute_mode",  # NVML refuses the compute-mode change
    "cuda.open",             # context creation fails
    "cuda.alloc",            # hard allocation error (not OOM)
    "cuda.shortfall",        # part of the free memory cannot be allocated (silent)
    "cuda.memset",           # memset returns an error
    "cuda.memset_silent",    # memset skips a granule without an error (verify must catch it)
    "cuda.verify",           # the verify kernel fails
    "nvml.partition_in_use",  # nvmlGpuInstanceDestroy: NVML_ERROR_IN_USE (a client holds it)
    "nvml.insufficient_resources",  # create with placement: NVML_ERROR_INSUFFICIENT_RESOURCES
)

#: DynamicMIG placements of one simulated GPU (8 memory slices, A100 80GB profiles):
#: (profile, GI profile id, memory slices, placement starts).
DYNAMIC_PROFILES: tuple[tuple[str, int, int, tuple[int, ...]], ...] = (
    ("1g.10gb", 19, 1, (0, 1, 2, 3, 4, 5, 6)),
    ("2g.20gb", 14, 2, (0, 2, 4)),
    ("3g.40gb", 9, 4, (0, 4)),
    ("7g.80gb", 0, 8, (0,)),
)
_MEMORY_SLICES = 8
_RESET_SECONDS = 0.5  # virtual seconds a destroy+create or a GPU reset takes

_MIG_PROFILE = ("1g.10gb", 19, 1)  # (name, GI profile id, memory slices): A100 80GB 1g slices
_SIM_BANDWIDTH = 2.0e12  # bytes/s the virtual clock advances per byte filled or verified


#: A host process's cgroup (cgroup v2): a Slurm job, an SSH session, a validator outside Kubernetes.
HOST_CGROUP = "0::/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0\n"


def kubelet_cgroup(pod_uid: str, container: str, driver: str = "systemd", qos: str = "burstable") -> str:
    """A ``/proc/<pid>/cgroup`` text (cgroup v2) as the kubelet names a pod's container cgroup.

    ``systemd``: slices with the UID's ``-`` escaped as ``_`` and containerd's scope; ``cgroupfs``:
    plain directories (kubernetes pkg/kubelet/cm, see :mod:`dra_constructs.agent.owners`).
    """
    level = "" if qos == "guaranteed" else f"-{qos}"
    if driver == "systemd":
        slice_ = f"kubepods{level}-pod{pod_uid.replace('-', '_')}.slice"
        parent = f"/kubepods.slice/kubepods{level}.slice" if level else "/kubepods.slice"
        return f"0::{parent}/{slice_}/cri-containerd-{container}.scope\n"
    parent = f"/kubepods/{qos}" if level else "/kubepods"
    return f"0::{parent}/pod{pod_uid}/{container}\n"


def _nonzero_bytes(rng: random.Random, n: int) -> bytes:
    """``n`` bytes of 1..255, each drawn exactly as ``rng.randint(1, 255)`` draws it (the same stream).

    CPython's ``randint(1, 255)`` is ``1 + _randbelow(255)``: ``getrandbits(8)`` until below 255
    (Lib/random.py ``_randbelow_with_getrandbits``); calling ``getrandbits`` here skips three Python
    frames per byte, which were a fifth of a fault schedule's CPU time.
    """
    bits = rng.getrandbits
    out = bytearray(n)
    for index in range(n):
        value = bits(8)
        while value >= 255:
            value = bits(8)
        out[index] = value + 1
    return bytes(out)


class SimulatedCrash(BaseException):
    """The agent process dies at this instant (raised by crash hooks in fault tests)."""


class FaultInjector:
    """Decides, per call, whether to inject a fault: each op fails with probability ``rates[op]``."""

    def __init__(self, rng: random.Random | None = None, rates: dict[str, float] | None = None) -> None:
        self._rng = rng or random.Random(0)
        self.rates = dict(rates or {})
        self.injected: list[str] = []
        self._lock = threading.Lock()

    @classmethod
    def uniform(cls, rng: random.Random, rate: float, ops: Iterable[str] = FAULT_OPS) -> FaultInjector:
        """The same rate for every op in ``ops``."""
        return cls(rng, dict.fromkeys(ops, rate))

    def hit(self, op: str) -> bool:
        """True if ``op`` fails this time (recorded in ``injected``)."""
        rate = self.rates.get(op, 0.0)
        if rate <= 0.0:
            return False
        with self._lock:
            if self._rng.random() < rate:
                self.injected.append(op)
                return True
        return False

    def uniform_draw(self) -> float:
        """A random number from the same generator (for fault sizes)."""
        with self._lock:
            return self._rng.random()


@dataclass
class _Process:
    pid: int
    behaviour: str  # "obey" | "ignore-term" | "unkillable" | "worker"
    term_delay: float = 0.0
    exit_at: float | None = None
    granules: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class AuditResult:
    """The hardware's view of a device: residue (non-zero bytes) and live contexts."""

    nonzero_bytes: int
    live_contexts: int
    uncovered_bytes: int = 0  # residue in memory the sanitizer's own context held (no fill reaches it)

    @property
    def clean(self) -> bool:
        """Nothing a next tenant could read and nobody else on the device."""
        return self.nonzero_bytes == 0 and self.live_contexts == 0


class _Gpu:
    """Physical memory (bytes + owner per granule) shared by the instances placed on it."""

    def __init__(self, size: int, gran: int) -> None:
        self.memory = bytearray(size)
        self.owner: list[int | None] = [None] * (size // gran)
        self.lock = threading.RLock()
        self.context_granules: set[int] = set()  # absolute granules the sanitizer's contexts held
        self.mig_on = True  # DynamicMIG on Ampere: always on; with a whole-GPU device toggled per claim
        self.whole: _Device | None = None  # DynamicMIG, Hopper+: the whole GPU gpu-N


class _OwnerView:
    """A device's window on its GPU's owner list (granule indices relative to the device)."""

    def __init__(self, owner: list[int | None], base: int, count: int) -> None:
        self._owner, self._base, self._count = owner, base, count

    def __getitem__(self, g: int) -> int | None:
        return self._owner[self._base + g]

    def __setitem__(self, g: int, pid: int | None) -> None:
        self._owner[self._base + g] = pid

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[int | None]:
        return iter(self._owner[self._base:self._base + self._count])


class _Device:
    def __init__(self, info: DeviceInfo, settings: SimulatedBackendSettings, gpu: _Gpu | None = None,
                 first_slice: int = 0) -> None:
        self.info = info
        self.clock = VirtualClock()
        self.gran = settings.allocation_granularity
        size = info.memory_bytes
        self.gpu = gpu or _Gpu(size, self.gran)
        offset = first_slice * settings.memory_bytes
        self.base = offset // self.gran
        self.memory = memoryview(self.gpu.memory)[offset:offset + size]
        self.owner = _OwnerView(self.gpu.owner, self.base, size // self.gran)
        self.processes: dict[int, _Process] = {}
        self.mode = ComputeMode.DEFAULT
        self.lock = self.gpu.lock
        self.scrub_on_free = settings.scrub_on_free
        self.exists = not info.dynamic  # DynamicMIG: only between prepare and unprepare
        self.instance_uuid = info.uuid
        self.generation = 0

    def reap(self) -> None:
        now = self.clock.monotonic()
        for pid in [p.pid for p in self.processes.values() if p.exit_at is not None and p.exit_at <= now]:
            self.remove(pid)

    def remove(self, pid: int) -> None:
        proc = self.processes.pop(pid, None)
        if proc is None:
            return
        for g in proc.granules:
            self.owner[g] = None
            if self.scrub_on_free:
                self.memory[g * self.gran:(g + 1) * self.gran] = bytes(self.gran)

    def check(self, uuid: str, op: str) -> None:
        """NVML/CUDA look the device up by UUID: a destroyed or recreated instance is gone."""
        if not self.exists or uuid != self.instance_uuid:
            raise BackendError(op, f"NVML_ERROR_NOT_FOUND (no instance {uuid} at {self.info.name})")

    def free_granules(self) -> list[int]:
        return [g for g, o in enumerate(self.owner) if o is None]

    def take(self, proc: _Process, granules: list[int]) -> None:
        for g in granules:
            self.owner[g] = proc.pid
            proc.granules.add(g)
            if proc.behaviour != "worker":  # a tenant's data now; the next fill must reach it
                self.gpu.context_granules.discard(self.base + g)


class SimulatedNode:
    """A node with ``gpus`` GPUs, each whole or cut into ``mig_slices_per_gpu`` 1g slices."""

    def __init__(
        self,
        settings: SimulatedBackendSettings | None = None,
        faults: FaultInjector | None = None,
        on_compute_mode: Callable[[str, ComputeMode], None] | None = None,
        whole_gpu: bool = False,
    ) -> None:
        self.settings = settings or SimulatedBackendSettings()
        self.whole_gpu = whole_gpu
        self.faults = faults or FaultInjector()
        self.on_compute_mode = on_compute_mode
        self._next_pid = 10_000
        self._pid_lock = threading.Lock()
        self._devices: dict[str, _Device] = {}
        #: ``/proc/<pid>/cgroup`` of the tenant processes that have one (the others: unreadable).
        self.cgroups: dict[int, str] = {}
        #: Parts of the node "NVML" cannot read (tests set them): returned by ``nvml.enumerate()``.
        self.enumeration_errors: list[EnumerationError] = []
        for minor in range(self.settings.gpus):
            gpu_uuid = f"GPU-sim-{minor:04d}"
            if self.settings.dynamic_mig:
                self._add_dynamic_gpu(minor, gpu_uuid)
                continue
            if self.settings.mig_slices_per_gpu == 0:
                info = DeviceInfo(gpu_device_name(minor), gpu_uuid, minor, self.settings.memory_bytes)
                self._devices[info.name] = _Device(info, self.settings)
                continue
            name, profile_id, slices = _MIG_PROFILE
            for index in range(self.settings.mig_slices_per_gpu):
                info = DeviceInfo(
                    mig_device_name(minor, name, profile_id, index * slices),
                    f"MIG-sim-{minor:04d}-{index}", minor, self.settings.memory_bytes,
                    parent_uuid=gpu_uuid, mig_profile=name, placement=(profile_id, index * slices, slices),
                )
                self._devices[info.name] = _Device(info, self.settings)
        self.nvml = _SimNvml(self)
        self.signaller = _SimSignaller(self)
        self.scrubber = _SimScrubber(self)
        self.partitions = _SimPartitions(self)
        #: ECC, row remapping, recovery action, XIDs and driver state per GPU (tests inject faults there).
        self.health = SimHealth()

    def _add_dynamic_gpu(self, minor: int, gpu_uuid: str) -> None:
        size = self.settings.memory_bytes
        gpu = _Gpu(size * _MEMORY_SLICES, self.settings.allocation_granularity)
        for profile, profile_id, slices, starts in DYNAMIC_PROFILES:
            for start in starts:
                info = DeviceInfo(
                    mig_device_name(minor, profile, profile_id, start), f"DYN-sim-{minor:04d}-{profile_id}-{start}",
                    minor, size * slices, parent_uuid=gpu_uuid, mig_profile=profile,
                    placement=(profile_id, start, slices), dynamic=True,
                )
                self._devices[info.name] = _Device(info, self.settings, gpu, start)
        if self.whole_gpu:  # Hopper+: the driver publishes gpu-N on the same counters; MIG mode off while idle
            info = DeviceInfo(gpu_device_name(minor), gpu_uuid, minor, size * _MEMORY_SLICES,
                              placement=(0, 0, _MEMORY_SLICES), dynamic=True, whole_gpu=True)
            whole = _Device(info, self.settings, gpu, 0)
            whole.exists, gpu.mig_on, gpu.whole = True, False, whole
            self._devices[info.name] = whole

    # --- the DRA driver side (DynamicMIG) ---------------------------------------------------

    def prepare(self, device: str) -> DeviceInfo:
        """The DRA driver prepares a claim: it creates the MIG instance (DynamicMIG).

        The whole GPU: MIG mode must be off (no instance); the GPU is the device."""
        dev = self._dev(device)
        if dev.info.whole_gpu:
            with dev.lock:
                if dev.gpu.mig_on:
                    raise BackendError("nvmlDeviceSetMigMode", "NVML_ERROR_IN_USE (MIG instances exist)")
                return dev.info
        return self.partitions.create(dev.info, faults=False)

    def unprepare(self, device: str) -> None:
        """The DRA driver unprepares: it destroys the instance (IN_USE while processes live)."""
        dev = self._dev(device)
        if dev.info.whole_gpu:
            return  # the whole GPU stays (MIG mode off)
        self.partitions.destroy(dev.info)

    # --- plumbing ---------------------------------------------------------------------------

    def _dev(self, name: str) -> _Device:
        return self._devices[name]

    def new_pid(self) -> int:
        with self._pid_lock:
            self._next_pid += 1
            return self._next_pid

    def clock(self, device: str) -> VirtualClock:
        """The virtual clock of one device (each device's barrier runs on its own)."""
        return self._dev(device).clock

    @property
    def device_infos(self) -> list[DeviceInfo]:
        """Every simulated device (static MIG devices with their current instance UUID)."""
        return [d.info for d in self._devices.values()]

    def add_mig_device(self, minor: int, start: int) -> DeviceInfo:
        """MIG reconfiguration after the agent started: a new 1g instance at ``start`` of GPU ``minor``."""
        name, profile_id, slices = _MIG_PROFILE
        info = DeviceInfo(mig_device_name(minor, name, profile_id, start), f"MIG-sim-{minor:04d}-new{start}", minor,
                          self.settings.memory_bytes, parent_uuid=f"GPU-sim-{minor:04d}", mig_profile=name,
                          placement=(profile_id, start, slices))
        self._devices[info.name] = _Device(info, self.settings)
        return info

    # --- the tenant side --------------------------------------------------------------------

    def cgroup_text(self, pid: int) -> str | None:
        """The ``/proc/<pid>/cgroup`` contents of a simulated process (None: unreadable)."""
        return self.cgroups.get(pid)

    def start_tenant(self, device: str, behaviours: list[tuple[str, float]], rng: random.Random,
                     exited_residue: bool = True, pod: str | None = None, cgroup: str | None = None) -> list[int]:
        """Run a tenant: processes that hold contexts and write non-zero data into their memory.

        ``behaviours``: ``(behaviour, term_delay)`` per process. With ``exited_residue`` an
        already-exited process also leaves data behind in freed memory. ``pod``: the pod UID the
        processes run in (a kubelet cgroup); ``cgroup``: any other cgroup text (:data:`HOST_CGROUP`);
        neither: the owner cannot be read.
        """
        dev = self._dev(device)
        pids = []
        with dev.lock:
            dev.reap()
            for behaviour, delay in [*behaviours, *([("exited", 0.0)] if exited_residue else [])]:
                free = dev.free_granules()
                if not free:
                    break
                proc = _Process(self.new_pid(), behaviour, term_delay=delay)
                count = rng.randint(1, max(1, len(free) // (len(behaviours) + 1)))
                granules = rng.sample(free, count)
                dev.take(proc, granules)
                for g in granules:
                    dev.memory[g * dev.gran:(g + 1) * dev.gran] = _nonzero_bytes(rng, dev.gran)
                dev.processes[proc.pid] = proc
                if pod is not None:
                    self.cgroups[proc.pid] = kubelet_cgroup(pod, f"{proc.pid:064x}")
                elif cgroup is not None:
                    self.cgroups[proc.pid] = cgroup
                if behaviour == "exited":
                    dev.remove(proc.pid)
                else:
                    pids.append(proc.pid)
        return pids

    def agent_died(self) -> None:
        """The agent process died: the driver tears down the contexts of its workers."""
        for dev in self._devices.values():
            with dev.lock:
                for pid in [p.pid for p in dev.processes.values() if p.behaviour == "worker"]:
                    dev.remove(pid)

    def repair(self, device: str) -> None:
        """An operator fixed what kept processes alive (e.g. a hung filesystem): they are gone."""
        dev = self._dev(device)
        with dev.lock:
            for pid in [p.pid for p in dev.processes.values() if p.behaviour != "worker"]:
                dev.remove(pid)

    def kubelet_stop(self, device: str) -> None:
        """The kubelet stopped the pod's containers (SIGKILL after its grace): only D-state ones stay."""
        dev = self._dev(device)
        with dev.lock:
            for pid in [p.pid for p in dev.processes.values() if p.behaviour in ("obey", "ignore-term")]:
                dev.remove(pid)

    def instance_exists(self, device: str) -> bool:
        """True while a MIG instance exists at the device's placement (DynamicMIG)."""
        return self._dev(device).exists

    def audit(self, device: str) -> AuditResult:
        """The hardware's view: residue a next tenant of ``device`` could read, and live contexts.

        Residue in granules the sanitizer's own context held is reported apart
        (``uncovered_bytes``). DynamicMIG: only the placement's memory no live instance owns
        counts (an overlapping live tenant's memory is not free, and not this device's).
        """
        dev = self._dev(device)
        gran = dev.gran
        with dev.lock:
            dev.reap()
            for other in self._devices.values():
                if other.gpu is dev.gpu:
                    other.reap()
            nonzero = uncovered = 0
            for g in range(len(dev.owner)):
                if dev.info.dynamic and dev.owner[g] is not None:
                    continue
                chunk = bytes(dev.memory[g * gran:(g + 1) * gran])
                count = gran - chunk.count(0)
                if (dev.base + g) in dev.gpu.context_granules:
                    uncovered += count
                else:
                    nonzero += count
            live = len(dev.processes) if dev.exists else 0
            return AuditResult(nonzero, live, uncovered)

    def compute_mode(self, device: str) -> ComputeMode:
        """Current compute mode of a device."""
        return self._dev(device).mode


class _SimNvml:
    """NvmlBackend over the simulated node."""

    def __init__(self, node: SimulatedNode) -> None:
        self._node = node

    def enumerate(self) -> EnumerationResult:
        return EnumerationResult(self._node.device_infos, list(self._node.enumeration_errors))

    def devices(self) -> list[DeviceInfo]:
        result = self.enumerate()
        if result.errors:
            raise EnumerationFailed(result)
        return result.devices

    def memory(self, device: DeviceInfo) -> MemoryInfo:
        dev = self._node._dev(device.name)
        with dev.lock:
            dev.reap()
            free = len(dev.free_granules()) * dev.gran
            total = len(dev.memory)
        return MemoryInfo(total=total, reserved=0, free=free, used=total - free)

    def processes(self, device: DeviceInfo) -> list[int]:
        faults = self._node.faults
        if faults.hit("nvml.gpu_lost"):
            raise BackendError("nvmlDeviceGetComputeRunningProcesses", "NVML_ERROR_GPU_IS_LOST", fatal=True)
        if faults.hit("nvml.processes"):
            raise BackendError("nvmlDeviceGetComputeRunningProcesses", "NVML_ERROR_UNKNOWN")
        dev = self._node._dev(device.name)
        with dev.lock:
            dev.check(device.uuid, "nvmlDeviceGetHandleByUUID")
            dev.reap()
            return sorted(dev.processes)

    def set_compute_mode(self, device: DeviceInfo, mode: ComputeMode) -> None:
        if self._node.faults.hit("nvml.set_compute_mode"):
            raise BackendError("nvmlDeviceSetComputeMode", "NVML_ERROR_NO_PERMISSION")
        dev = self._node._dev(device.name)
        with dev.lock:
            dev.check(device.uuid, "nvmlDeviceGetHandleByUUID")
            dev.mode = mode
        if self._node.on_compute_mode is not None:
            self._node.on_compute_mode(device.name, mode)

    def scrub_on_free_disabled(self) -> bool | None:
        return not self._node.settings.scrub_on_free


class _SimSignaller:
    """Signals simulated processes; their reaction follows their behaviour."""

    def __init__(self, node: SimulatedNode) -> None:
        self._node = node

    def signal(self, pid: int, signum: int) -> bool:
        for dev in self._node._devices.values():
            with dev.lock:
                dev.reap()
                proc = dev.processes.get(pid)
                if proc is None:
                    continue
                now = dev.clock.monotonic()
                if signum == signal.SIGTERM and proc.behaviour in ("obey", "worker"):
                    proc.exit_at = min(proc.exit_at or now + proc.term_delay, now + proc.term_delay)
                elif signum == signal.SIGKILL and proc.behaviour != "unkillable":
                    proc.exit_at = now
                dev.reap()
                return True
        return False


class _SimSession:
    """One simulated context on one device, held by a worker process."""

    def __init__(self, node: SimulatedNode, dev: _Device) -> None:
        self._node = node
        self._dev = dev
        self._proc = _Process(node.new_pid(), "worker")
        self._overhead: list[int] = []
        self._filled: list[int] = []
        self._free_at_open = 0
        self._closed = False
        gran = dev.gran
        with dev.lock:
            dev.reap()
            live = [p for p in dev.processes.values()]
            if dev.mode is ComputeMode.PROHIBITED:
                raise BackendError("cuCtxCreate", "CUDA_ERROR_COMPUTE_MODE_PROHIBITED (compute mode)")
            if dev.mode is ComputeMode.EXCLUSIVE_PROCESS and live:
                raise BackendError("cuCtxCreate", "CUDA_ERROR_DEVICE_BUSY (exclusive-process, in use)")
            free = dev.free_granules()
            need = node.settings.context_overhead_bytes // gran
            if len(free) < need:
                raise BackendError("cuCtxCreate", "CUDA_ERROR_OUT_OF_MEMORY")
            self._overhead = free[:need]
            dev.take(self._proc, self._overhead)
            # No zeroing by fiat: the context's memory keeps what was there (no fill reaches it).
            # Cumulative: residue in any granule a sanitizer context held stays uncovered until a
            # tenant takes the granule again (then the next fill must reach it).
            dev.gpu.context_granules |= {dev.base + g for g in self._overhead}
            dev.processes[self._proc.pid] = self._proc
            self._free_at_open = (len(free) - need) * gran

    @property
    def pid(self) -> int:
        return self._proc.pid

    def fill(self) -> FillResult:
        _node, dev, faults = self._node, self._dev, self._node.faults
        gran = dev.gran
        start = dev.clock.monotonic()
        if faults.hit("cuda.alloc"):
            raise BackendError("cuMemAlloc", "CUDA_ERROR_UNKNOWN")
        with dev.lock:
            free = dev.free_granules()
            if faults.hit("cuda.shortfall"):  # the allocator cannot reach 2-50% of the free memory
                keep = max(1, int(len(free) * (0.02 + 0.48 * faults.uniform_draw())))
                free = free[:len(free) - keep]
            chunk = len(free)
            while free and chunk >= 1:  # greedy: largest chunk first, halve on OOM (like cuMemAlloc)
                if chunk <= len(free):
                    taken, free = free[:chunk], free[chunk:]
                    dev.take(self._proc, taken)
                    self._filled.extend(taken)
                else:
                    chunk //= 2
            if faults.hit("cuda.memset"):
                raise BackendError("cuMemsetD32Async", "CUDA_ERROR_ILLEGAL_ADDRESS")
            skip = None
            if self._filled and faults.hit("cuda.memset_silent"):  # worst case: it misses tenant data
                dirty = [g for g in self._filled if any(dev.memory[g * gran:(g + 1) * gran])]
                skip = (dirty or self._filled)[0]
            for g in self._filled:
                if g != skip:
                    dev.memory[g * gran:(g + 1) * gran] = bytes(gran)
        zeroed = len(self._filled) * gran
        dev.clock.sleep(zeroed / _SIM_BANDWIDTH)
        return FillResult(bytes_total=len(dev.memory), bytes_free=self._free_at_open,
                          bytes_zeroed=zeroed, seconds=dev.clock.monotonic() - start)

    def verify(self) -> VerifyResult:
        dev = self._dev
        gran = dev.gran
        start = dev.clock.monotonic()
        if self._node.faults.hit("cuda.verify"):
            raise BackendError("cuLaunchKernel(verify)", "CUDA_ERROR_LAUNCH_FAILED")
        nonzero = 0
        zero_granule = bytes(gran)
        with dev.lock:
            for g in self._filled:
                chunk = bytes(dev.memory[g * gran:(g + 1) * gran])
                if chunk != zero_granule:
                    nonzero += sum(1 for i in range(0, gran, 8) if any(chunk[i:i + 8]))
        verified = len(self._filled) * gran
        dev.clock.sleep(verified / _SIM_BANDWIDTH)
        return VerifyResult(bytes_verified=verified, nonzero_words=nonzero,
                            seconds=dev.clock.monotonic() - start)

    def _take_all(self) -> list[int]:
        free = self._dev.free_granules()
        self._dev.take(self._proc, free)
        self._filled.extend(free)
        return free

    def write_pattern(self, pattern: int) -> int:
        """Canary: every free granule set to ``pattern``, then the worker exits as a tenant does
        (its granules freed, zeroed only with ``scrub_on_free``); bytes written."""
        dev = self._dev
        word = pattern.to_bytes(8, "little")
        with dev.lock:
            taken = self._take_all()
            for g in taken:
                dev.memory[g * dev.gran:(g + 1) * dev.gran] = word * (dev.gran // 8)
        self.close()
        return len(taken) * dev.gran

    def read_residue(self, pattern: int) -> tuple[int, int, int]:
        """Canary: (bytes read, words equal to ``pattern``, other non-zero words) in this fresh context."""
        dev = self._dev
        word = pattern.to_bytes(8, "little")
        found = other = 0
        with dev.lock:
            taken = self._take_all()
            for g in taken:
                chunk = bytes(dev.memory[g * dev.gran:(g + 1) * dev.gran])
                for i in range(0, dev.gran, 8):
                    found += chunk[i:i + 8] == word
                    other += chunk[i:i + 8] != word and any(chunk[i:i + 8])
        return len(taken) * dev.gran, found, other

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._dev.lock:
            self._dev.remove(self._proc.pid)


class _SimScrubber:
    """MemoryScrubber over the simulated node."""

    def __init__(self, node: SimulatedNode) -> None:
        self._node = node

    def open(self, device: DeviceInfo, timeout_s: float) -> _SimSession:
        if self._node.faults.hit("cuda.open"):
            raise BackendError("cuCtxCreate", "CUDA_ERROR_NOT_INITIALIZED")
        dev = self._node._dev(device.name)
        with dev.lock:
            dev.check(device.uuid, "cuDeviceGet (CUDA_VISIBLE_DEVICES)")
        return _SimSession(self._node, dev)


class _SimPartitions:
    """PartitionBackend over the simulated node: MIG instances at placements, GPU reset."""

    def __init__(self, node: SimulatedNode) -> None:
        self._node = node

    def instance(self, device: DeviceInfo) -> DeviceInfo | None:
        dev = self._node._dev(device.name)
        with dev.lock:
            return replace(dev.info, uuid=dev.instance_uuid) if dev.exists else None

    def mig_enabled(self, device: DeviceInfo) -> bool:
        dev = self._node._dev(device.name)
        with dev.lock:
            return dev.gpu.mig_on

    def destroy(self, device: DeviceInfo) -> None:
        dev = self._node._dev(device.name)
        with dev.lock:
            if not dev.exists:
                return
            dev.reap()
            if dev.processes or self._node.faults.hit("nvml.partition_in_use"):
                raise BackendError("nvmlGpuInstanceDestroy", "NVML_ERROR_IN_USE (in use by another client)")
            dev.exists = False  # the memory keeps its bytes: nothing says a GI destroy scrubs it
            dev.mode = ComputeMode.DEFAULT
            dev.clock.sleep(_RESET_SECONDS / 2)
            whole = dev.gpu.whole
            if whole is not None and not any(o.exists for o in self._node._devices.values()
                                              if o.gpu is dev.gpu and o is not whole):
                dev.gpu.mig_on, whole.exists, whole.mode = False, True, ComputeMode.DEFAULT  # the driver: MIG off

    def create(self, device: DeviceInfo, faults: bool = True) -> DeviceInfo:
        node = self._node
        dev = node._dev(device.name)
        with dev.lock:
            if dev.exists:
                raise BackendError("nvmlDeviceCreateGpuInstanceWithPlacement", "NVML_ERROR_INSUFFICIENT_RESOURCES "
                                   "(an instance exists at this placement)")
            whole = dev.gpu.whole
            mig_off = whole is not None and not dev.gpu.mig_on
            busy = [o.info.name for o in node._devices.values() if o is not dev and o.gpu is dev.gpu and o.exists
                    and o.info.overlaps(dev.info) and not (mig_off and o is whole)]
            if busy or (faults and node.faults.hit("nvml.insufficient_resources")):
                raise BackendError("nvmlDeviceCreateGpuInstanceWithPlacement",
                                   f"NVML_ERROR_INSUFFICIENT_RESOURCES (overlaps {', '.join(busy) or 'a reservation'})")
            if whole is not None and mig_off:  # the driver turns MIG mode on first (the GPU must be idle)
                whole.reap()
                if whole.processes or dev is whole:
                    raise BackendError("nvmlDeviceSetMigMode", "NVML_ERROR_IN_USE (the whole GPU is in use)")
                dev.gpu.mig_on, whole.exists = True, False
            dev.generation += 1
            minor, (_, start, size) = dev.info.minor, dev.info.placement or (0, 0, 1)
            dev.instance_uuid = f"MIG-sim-{minor:04d}-{start}-{size}-g{dev.generation}"
            if not dev.info.dynamic:
                dev.info = replace(dev.info, uuid=dev.instance_uuid)
            dev.exists = True
            dev.mode = ComputeMode.DEFAULT
            dev.clock.sleep(_RESET_SECONDS / 2)
            return replace(dev.info, uuid=dev.instance_uuid)

    def reset_gpu(self, device: DeviceInfo, timeout_s: float) -> DeviceInfo:
        dev = self._node._dev(device.name)
        with dev.lock:
            dev.reap()
            if dev.processes or self._node.faults.hit("nvml.partition_in_use"):
                raise BackendError("nvidia-smi --gpu-reset", "In use by another client (IN_USE)")
            dev.mode = ComputeMode.DEFAULT
            dev.clock.sleep(_RESET_SECONDS)
            # The driver re-initialises the GPU: its volatile ECC counts start again (nvml.h line 1097,
            # go-nvml 2f9e261: "Volatile counts are reset each time the driver loads ... On Linux this can
            # be more frequent").
            self._node.health.gpu(device.gpu_uuid).ecc_volatile_uncorrected = 0
            return dev.info
