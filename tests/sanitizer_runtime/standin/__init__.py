"""Stand-in NVIDIA driver libraries for tests without a GPU (``libnvidia-ml.so.1``, ``libcuda.so.1``).

The C sources next to this file are compiled with the system ``gcc`` once per test session
(:func:`build`). The real backends load them the way they load the real driver: pynvml
(nvidia-ml-py) calls ``CDLL("libnvidia-ml.so.1")`` and cuda-bindings resolves ``libcuda.so.1``
through ``cuda.pathfinder``'s system search, so both follow ``LD_LIBRARY_PATH`` in a child
process. In the test process itself :func:`preload_nvml` loads the stand-in by path first (the
dynamic loader then answers ``libnvidia-ml.so.1`` by its soname).

NVRTC is the real one (``nvidia-cuda-nvrtc-cu12``, in the ``gpu`` extra): it compiles without
a GPU, so the verify kernel the worker loads is a real cubin or PTX, checked by the stand-in
``cuModuleLoadData`` against the configured architecture and PTX ISA limit.

A :class:`Node` describes one machine (GPUs, MIG instances with several compute instances,
memory, errors, residue) and writes the flat ``key=value`` file the C code reads
(``$DRA_STANDIN_CONFIG``); its state directory holds the shared device memory, allocation
tables and compute modes, so a tenant process's bytes and contexts are seen by the agent.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MiB = 1 << 20

# NVML_GPU_INSTANCE_PROFILE_* indices (nvml.h), as the driver's go-nvlib maps them to names.
GI_1_SLICE, GI_2_SLICE, GI_3_SLICE, GI_4_SLICE, GI_7_SLICE = 0x0, 0x1, 0x2, 0x3, 0x4
GI_1_SLICE_REV1, GI_2_SLICE_REV1, GI_1_SLICE_REV2 = 0x7, 0x8, 0x9
GI_1_SLICE_GFX, GI_2_SLICE_GFX, GI_4_SLICE_GFX, GI_1_SLICE_NO_ME = 0xA, 0xB, 0xC, 0xD
NVML_ERROR_NO_PERMISSION, NVML_ERROR_GPU_IS_LOST = 4, 15
#: ``/proc/devices`` of a node with the NVIDIA driver loaded: ``nvidia-frontend`` is fixed at 195
#: (``NV_MAJOR_DEVICE_NUMBER``); the majors of ``nvidia-uvm`` and ``nvidia-caps`` are dynamic.
CAPS_MAJOR = 237
PROC_DEVICES = ("Character devices:\n  1 mem\n  4 /dev/vc/0\n195 nvidia-frontend\n235 nvidia-uvm\n"
                f"{CAPS_MAJOR} nvidia-caps\n\nBlock devices:\n  7 loop\n195 not-a-char\n")


def build(out: Path) -> Path:
    """Compile both stand-ins into ``out`` (returns it); a missing or failing gcc fails loudly."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        raise RuntimeError("the stand-in driver tests need a C compiler (gcc) on PATH")
    out.mkdir(parents=True, exist_ok=True)
    for soname, source in (("libcuda.so.1", "cuda.c"), ("libnvidia-ml.so.1", "nvml.c")):
        subprocess.run(
            [gcc, "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", f"-Wl,-soname,{soname}",
             "-o", str(out / soname), str(HERE / source), str(HERE / "standin.c")],
            check=True, capture_output=True, text=True,
        )
    return out


def preload_nvml(libdir: Path) -> None:
    """Load the NVML stand-in into this process before pynvml looks for ``libnvidia-ml.so.1``."""
    ctypes.CDLL(str(libdir / "libnvidia-ml.so.1"), mode=ctypes.RTLD_GLOBAL)


@dataclass
class CI:
    """One MIG compute instance (a MIG device with its own UUID)."""

    uuid: str
    id: int = 0
    profile_index: int = 0             # NVML_COMPUTE_INSTANCE_PROFILE_* (0: 1 slice)
    placement_start: int | None = None  # compute slice inside the GI (default: its index)
    placement_size: int = 1


@dataclass
class GI:
    """One MIG GPU instance: its own memory, one or more compute instances."""

    id: int
    cis: list[CI]
    profile_index: int = GI_1_SLICE
    profile_id: int = 19
    slices: int = 1
    placement_start: int = 0
    placement_size: int = 1
    memory_mb: int = 9856          # profile memorySizeMB: names the profile (1g.10gb on an 80 GB GPU)
    total: int = 32 * MiB          # bytes really backed
    reserved: int = 2 * MiB
    unlisted_used: int = 0         # held by a process NVML does not list
    error: int = 0                 # NVML error for error_call (or every call) on this GI's handles
    error_call: str = ""
    present: bool = True           # False: only a possible placement (created by NVML calls, DynamicMIG)


@dataclass
class GPU:
    """One GPU; MIG mode when ``gis`` is non-empty and ``mig`` is set."""

    uuid: str
    minor: int = 0
    name: str = "NVIDIA H100 80GB HBM3"
    arch: int = 90
    sms: int = 8
    total: int = 64 * MiB          # MIG parent: the reported total (names MIG profiles)
    reserved: int = 2 * MiB
    context_overhead: int = 4 * MiB
    unlisted_used: int = 0
    mig: bool = False
    aggregate_error: int = 0
    error: int = 0
    error_call: str = ""
    gis: list[GI] = field(default_factory=list)


#: Driver generations the stand-in answers as: (driver version, CUDA version of its NVML/libcuda, PTX ISA max).
#: R535 = CUDA 12.2, R550 = 12.4, R570 = 12.8, R580 = 13.0 (the branches users run); "13.3": the first NVML
#: whose nvml.h accepts compute mode on a MIG device handle (go-nvml 8b8585b). Its driver branch number is
#: not in our references: the version string below is a placeholder; only its CUDA version 13030 matters.
GENERATIONS: dict[str, tuple[str, int, int]] = {
    "535": ("535.261.03", 12020, 82),
    "550": ("550.163.01", 12040, 84),
    "570": ("570.124.06", 12080, 87),
    "580": ("580.95.05", 13000, 90),
    "13.3": ("999.13.3-placeholder", 13030, 93),
}
#: What users run (a pre-13.3 NVML: no compute mode on MIG). Tests of per-MIG compute mode say "13.3".
DEFAULT_GENERATION = "570"


@dataclass
class Node:
    """The machine the stand-in driver pretends to be, and where its shared state lives."""

    root: Path
    libdir: Path
    gpus: list[GPU]
    #: Driver generation (GENERATIONS key; env DRA_STANDIN_GENERATION overrides the default).
    generation: str = field(default_factory=lambda: os.environ.get("DRA_STANDIN_GENERATION", DEFAULT_GENERATION))
    driver_version: str | None = None   # None: the generation's
    cuda_version: int | None = None
    ptx_isa_max: int | None = None      # e.g. R570: PTX ISA 8.7 = 87
    scrub_on_free: bool = False
    #: ``nvmlGpuInstanceDestroy`` zeroes the GI's memory slices (no public source says whether the real
    #: driver does; False: the next GI at the placement reads what the last one's tenant left).
    gi_destroy_scrub: bool = False
    #: Before CUDA 13.3: NVML refuses DEFAULT on MIG as well (else it accepts it as a no-op).
    mig_default_refused: bool = False
    residue_byte: int | None = None
    residue_len: int = 0
    #: The MIG ``config`` capability as the agent's pod sees it (:mod:`dra_constructs.agent.migaccess`):
    #: the driver's ``/proc/driver/nvidia/capabilities/mig/config`` (``DeviceFileMinor: 1``) and the
    #: ``/dev/nvidia-caps/nvidia-cap1`` node, under ``host/`` (``DRA_SANITIZER_HOST_ROOT``). False: absent.
    mig_config: bool = True
    #: The driver publishes each live GI's and CI's capability ``access`` file under
    #: ``<proc_root>/driver/nvidia/capabilities/gpu<minor>/mig/gi<G>[/ci<C>]/access`` (``DeviceFileMinor``
    #: as ``/proc/driver/nvidia-caps/mig-minors`` numbers them; standin.c ``si_caps_publish``). False: none.
    mig_caps: bool = True

    @property
    def config_path(self) -> Path:
        return self.root / "standin.conf"

    @property
    def state_dir(self) -> Path:
        return self.root / "driver-state"

    @property
    def proc_root(self) -> Path:
        """The agent's ``proc_root`` in these tests: ``<pid>/cgroup`` files of the tenants' pods."""
        return self.root / "proc"

    def write(self) -> Node:
        """Write the config file (call again after changing fields; memory files persist)."""
        if self.generation not in GENERATIONS:
            raise ValueError(f"unknown driver generation {self.generation!r}: one of {', '.join(GENERATIONS)}")
        driver, cuda, ptx = GENERATIONS[self.generation]
        lines: dict[str, Any] = {
            "state_dir": self.state_dir, "driver_version": self.driver_version or driver,
            "caps_dir": self.proc_root / "driver/nvidia/capabilities" if self.mig_caps else "",
            "cuda_version": self.cuda_version or cuda, "ptx_isa_max": self.ptx_isa_max or ptx,
            "scrub_on_free": int(self.scrub_on_free), "gi_destroy_scrub": int(self.gi_destroy_scrub),
            "mig_default_refused": int(self.mig_default_refused),
            "gpus": len(self.gpus),
            "residue_len": self.residue_len,
        }
        if self.residue_byte is not None:
            lines["residue_byte"] = self.residue_byte
        for g, gpu in enumerate(self.gpus):
            for key in ("uuid", "minor", "name", "arch", "sms", "total", "reserved", "context_overhead",
                        "unlisted_used", "aggregate_error", "error", "error_call"):
                lines[f"gpu.{g}.{key}"] = getattr(gpu, key)
            lines[f"gpu.{g}.mig"] = int(gpu.mig)
            lines[f"gpu.{g}.gis"] = len(gpu.gis)
            for i, gi in enumerate(gpu.gis):
                for key in ("id", "profile_index", "profile_id", "slices", "placement_start", "placement_size",
                            "memory_mb", "total", "reserved", "unlisted_used", "error", "error_call"):
                    lines[f"gpu.{g}.gi.{i}.{key}"] = getattr(gi, key)
                lines[f"gpu.{g}.gi.{i}.cis"] = len(gi.cis)
                lines[f"gpu.{g}.gi.{i}.present"] = int(gi.present)
                for c, ci in enumerate(gi.cis):
                    lines[f"gpu.{g}.gi.{i}.ci.{c}.uuid"] = ci.uuid
                    lines[f"gpu.{g}.gi.{i}.ci.{c}.id"] = ci.id
                    lines[f"gpu.{g}.gi.{i}.ci.{c}.profile_index"] = ci.profile_index
                    start = c if ci.placement_start is None else ci.placement_start
                    lines[f"gpu.{g}.gi.{i}.ci.{c}.placement_start"] = start
                    lines[f"gpu.{g}.gi.{i}.ci.{c}.placement_size"] = ci.placement_size
        self.root.mkdir(parents=True, exist_ok=True)
        self.proc_root.mkdir(exist_ok=True)  # the host's /proc: always there, with the driver's majors
        (self.proc_root / "devices").write_text(PROC_DEVICES, encoding="utf-8")
        self._write_mig_config()
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text("".join(f"{k}={v}\n" for k, v in lines.items()), encoding="utf-8")
        tmp.replace(self.config_path)
        return self

    @property
    def host_root(self) -> Path:
        return self.root / "host"

    def _write_mig_config(self) -> None:
        """The files the NVIDIA driver publishes for the MIG config capability (nvidia-capabilities)."""
        proc = self.host_root / "proc/driver/nvidia/capabilities/mig/config"
        cap = self.host_root / "dev/nvidia-caps/nvidia-cap1"
        if not self.mig_config:
            proc.unlink(missing_ok=True)
            cap.unlink(missing_ok=True)
            return
        proc.parent.mkdir(parents=True, exist_ok=True)
        cap.parent.mkdir(parents=True, exist_ok=True)
        proc.write_text("DeviceFileMinor: 1\nDeviceFileMode: 256\nDeviceFileModify: 1\n", encoding="utf-8")
        cap.touch()

    def env(self) -> dict[str, str]:
        """Environment that makes a child process load the stand-ins."""
        ld = os.environ.get("LD_LIBRARY_PATH")
        return {"LD_LIBRARY_PATH": f"{self.libdir}{os.pathsep + ld if ld else ''}",
                "DRA_STANDIN_CONFIG": str(self.config_path), "DRA_SANITIZER_HOST_ROOT": str(self.host_root)}

    def memory(self, gpu: int = 0, gi: int | None = None) -> bytes:
        """The device memory's current bytes (what the next tenant could read)."""
        name = f"gpu{gpu}" if gi is None else f"gpu{gpu}-gi{gi}"
        return (self.state_dir / f"mem-{name}").read_bytes()

    def layout(self) -> dict[int, list[str]]:
        """GI slot -> UUIDs of its live compute instances, as the stand-in keeps them after NVML changes."""
        path = self.state_dir / "layout"
        if not path.exists():
            return {i: [c.uuid for c in gi.cis] for gpu in self.gpus for i, gi in enumerate(gpu.gis) if gi.present}
        present: dict[int, list[str]] = {}
        for line in path.read_text().splitlines():
            parts = line.split()
            if parts[0] == "gi" and parts[3] == "1":
                present[int(parts[2])] = []
            elif parts[0] == "ci" and parts[4] == "0" and int(parts[2]) in present:
                present[int(parts[2])].append(parts[9])
        return present

    def set_health(self, gpu: int = 0, **values: int) -> None:
        """The GPU's health as the stand-in NVML answers it from now on (nvml.c "health"), e.g.
        ``ecc_volatile_uncorrected=1``, ``remap_pending=1``, ``recovery_action=2``, ``ecc_enabled=0``;
        merged with what was set before (absent keys: a healthy data-center GPU)."""
        path = self.state_dir / f"health-gpu{gpu}"
        current = dict(line.split("=", 1) for line in path.read_text().splitlines()) if path.exists() else {}
        current.update({k: str(int(v)) for k, v in values.items()})
        self.state_dir.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{k}={v}\n" for k, v in current.items()), encoding="utf-8")

    def xid(self, gpu: int, code: int) -> None:
        """A critical XID event on the GPU (delivered to event sets registered before it)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with (self.state_dir / f"xid-gpu{gpu}").open("a", encoding="utf-8") as handle:
            handle.write(f"{code}\n")

    def compute_mode(self, uuid: str) -> int:
        """NVML compute mode of a GPU / MIG device as the stand-in keeps it (0 = DEFAULT)."""
        path = self.state_dir / f"mode-{uuid}"
        return int(path.read_text()) if path.exists() else 0


class Tenant:
    """A real child process holding a context on one device through the stand-in libcuda."""

    def __init__(self, node: Node, uuid: str, *, nbytes: int = 8 * MiB, pattern: int = 0xA5C35A3C,
                 ignore_term: bool = False, hold: bool = True, pod: str | None = None) -> None:
        args = [sys.executable, str(HERE / "tenant.py"), "--bytes", str(nbytes), "--pattern", str(pattern)]
        if ignore_term:
            args.append("--ignore-term")
        if not hold:
            args.append("--exit")
        env = {**os.environ, **node.env(), "CUDA_VISIBLE_DEVICES": uuid}
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            self.proc.wait(timeout=10)
            raise RuntimeError(f"tenant did not start: {line!r} {self.proc.stderr.read() if self.proc.stderr else ''}")
        if pod is not None:  # the real PID's cgroup file, as the kubelet's cgroupfs driver names it
            cgroup(node, self.proc.pid, pod)
        if not hold:
            self.proc.wait(timeout=10)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def cgroup(node: Node, pid: int, pod: str, container: str = "4f" * 32) -> Path:
    """``<proc_root>/<pid>/cgroup`` of a Burstable pod's container, cgroup v1 (one line per hierarchy).

    kubelet's cgroupfs driver: ``/kubepods/burstable/pod<uid>/<container id>`` (kubernetes
    pkg/kubelet/cm/pod_container_manager_linux.go, ``podCgroupNamePrefix = "pod"``; v1 lists the
    same path for every controller, and ``0::`` is the unified line of a hybrid host).
    """
    path = f"/kubepods/burstable/pod{pod}/{container}"
    lines = [f"12:memory:{path}", f"11:devices:{path}", f"4:cpu,cpuacct:{path}", f"1:name=systemd:{path}", f"0::{path}"]
    target = node.proc_root / str(pid) / "cgroup"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


def wait_for(predicate: Any, timeout: float = 10.0) -> bool:
    """Poll ``predicate`` until true or ``timeout``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())
