"""Stand-in AMD GPU libraries for tests without a GPU (``libamd_smi.so``, ``libamdhip64.so``).

The C sources next to this file are compiled with the system ``gcc`` (:func:`build`). The real
bindings load them the way they load ROCm's: the ``amdsmi`` package's ``amdsmi_wrapper`` tries
``$ROCM_PATH/lib/libamd_smi.so`` first, then ``CDLL("libamd_smi.so")`` (``LD_LIBRARY_PATH``), and
binds every function it knows at import; hip-python ``dlopen``s ``libamdhip64.so`` (the dynamic
loader's search: ``LD_LIBRARY_PATH``) at the first HIP call and ``dlsym``s each function as it is
first called. So the HIP stand-in has exactly the functions the worker calls, and the SMI stand-in
has the ones the backend calls plus a generated stub (``AMDSMI_STATUS_NOT_SUPPORTED``) for every
other name the installed wrapper binds, read from the wrapper itself.

A :class:`AmdNode` describes one machine (devices: whole GPUs or compute partitions, memory,
errors, residue) and writes the flat ``key=value`` file the C code reads
(``$DRA_AMD_STANDIN_CONFIG``); its state directory holds each device's VRAM and allocation table,
so a tenant process's bytes and HIP contexts are seen by the agent. ``sysfs`` is a directory tree
holding each GPU's ``enforce_isolation`` and ``run_cleaner_shader`` files, as
``Documentation/gpu/amdgpu/process-isolation.rst`` describes them (:class:`FakeSysfs`).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
MiB = 1 << 20
#: amdsmi.h amdsmi_status_t values the tests inject.
AMDSMI_STATUS_NO_PERM, AMDSMI_STATUS_DRIVER_NOT_LOADED = 10, 34

#: ``/proc/devices`` of an amdgpu node: ``drm`` is DRM_MAJOR (226); ``kfd`` is dynamic (``register_chrdev(0,
#: "kfd", ...)`` in kfd_chardev.c), here 511 so that it can be no other driver's on the test machine.
KFD_MAJOR = 511
PROC_DEVICES = f"Character devices:\n  1 mem\n  5 /dev/tty\n226 drm\n{KFD_MAJOR} kfd\n\nBlock devices:\n  7 loop\n"

_IMPLEMENTED = re.compile(r"^amdsmi_status_t (amdsmi_\w+)\(", re.M)


def wrapper_symbols() -> list[str]:
    """Every libamd_smi function the installed ``amdsmi`` wrapper binds at import."""
    spec = importlib.util.find_spec("amdsmi")
    if spec is None or spec.origin is None:
        raise RuntimeError("the amdsmi package is not installed")
    text = (Path(spec.origin).parent / "amdsmi_wrapper.py").read_text(encoding="utf-8")
    return sorted(set(re.findall(r"_libraries\['libamd_smi\.so'\]\.(\w+)", text)))


def build(out: Path) -> Path:
    """Compile both stand-ins into ``out`` (returns it); a missing or failing gcc fails loudly."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        raise RuntimeError("the AMD stand-in tests need a C compiler (gcc) on PATH")
    out.mkdir(parents=True, exist_ok=True)
    implemented = set(_IMPLEMENTED.findall((HERE / "amd_smi.c").read_text()))
    stubs = out / "stubs.c"
    lines = ["/* Generated from the installed amdsmi_wrapper.py: functions the backend never calls. */",
             "#define AMDSMI_STATUS_NOT_SUPPORTED 2"]
    for name in wrapper_symbols():
        if name not in implemented:
            lines.append(f"unsigned int {name}(void) {{ return AMDSMI_STATUS_NOT_SUPPORTED; }}")
    stubs.write_text("\n".join(lines) + "\n")
    flags = ["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror"]
    for soname, sources in (("libamd_smi.so", [HERE / "amd_smi.c", stubs]), ("libamdhip64.so", [HERE / "hip.c"])):
        subprocess.run([gcc, *flags, f"-Wl,-soname,{soname}", "-o", str(out / soname), *map(str, sources),
                        str(HERE / "amd.c")], check=True, capture_output=True, text=True)
    return out


@dataclass
class AmdDevice:
    """One processor amd-smi lists: a whole GPU (SPX) or one compute partition of a GPU."""

    uuid: str
    hip_uuid: str
    card: int
    render: int
    bdf: int = 0x0C00                  # amdsmi_bdf_t.as_uint (partitions of one GPU share it)
    partition_id: int = 0              # the XCP index: its position in enforce_isolation
    compute_partition: str = "SPX"
    memory_partition: str = "NPS1"
    total: int = 64 * MiB
    context_overhead: int = 4 * MiB
    ecc_enabled: int = 0xFFFF
    ecc_uncorrectable: int = 0
    error: int = 0
    error_call: str = ""
    extra_pids: list[int] = field(default_factory=list)


@dataclass
class AmdNode:
    """The machine the stand-in pretends to be, and where its shared state lives."""

    root: Path
    libdir: Path
    devices: list[AmdDevice]
    driver_version: str = "6.12.12"
    ras: bool = True
    residue_byte: int | None = None
    memset_skip_tail: int = 0

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def proc_root(self) -> Path:
        """Where the tests put tenants' ``/proc/<pid>/cgroup`` files (the agent's ``proc_root``)."""
        return self.root / "proc"

    @property
    def config_path(self) -> Path:
        return self.root / "amd-standin.conf"

    @property
    def sysfs(self) -> Path:
        return self.root / "sys"

    def write(self) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        lines = [f"state_dir={self.state}", f"driver_version={self.driver_version}", f"ras={int(self.ras)}",
                 f"memset_skip_tail={self.memset_skip_tail}", f"ndevs={len(self.devices)}"]
        if self.residue_byte is not None:
            lines.append(f"residue_byte={self.residue_byte}")
        for i, d in enumerate(self.devices):
            values = {"uuid": d.uuid, "hip_uuid": d.hip_uuid, "card": d.card, "render": d.render, "hip_id": i,
                      "bdf": d.bdf, "partition_id": d.partition_id, "compute_partition": d.compute_partition,
                      "memory_partition": d.memory_partition, "total": d.total,
                      "context_overhead": d.context_overhead, "ecc_enabled": d.ecc_enabled,
                      "ecc_uncorrectable": d.ecc_uncorrectable, "error": d.error, "error_call": d.error_call,
                      "extra_pids": ",".join(map(str, d.extra_pids))}
            lines += [f"dev.{i}.{k}={v}" for k, v in values.items()]
        self.config_path.write_text("\n".join(lines) + "\n")
        self.proc_root.mkdir(parents=True, exist_ok=True)
        (self.proc_root / "devices").write_text(PROC_DEVICES, encoding="utf-8")

    def dev(self, name: str) -> str:
        """The node's ``/dev/<name>`` (``kfd``, ``dri/renderD<N>``, ``dri/card<N>``) as a real character device
        with the numbers amdgpu gives it (mknod: the tests run as root); its path."""
        number = (KFD_MAJOR, 0) if name == "kfd" else (226, int(name.rpartition("renderD" if "render" in name
                                                                                 else "card")[2]))
        path = self.root / "dev" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(*number))
        return str(path)

    def memory(self, index: int) -> bytes:
        """The VRAM bytes of device ``index`` as the stand-in holds them."""
        return (self.state / f"mem-{index}").read_bytes()

    def env(self) -> dict[str, str]:
        """Environment of a process that should see this node (the agent's HIP worker, a tenant)."""
        env = dict(os.environ)
        env["DRA_AMD_STANDIN_CONFIG"] = str(self.config_path)
        env["LD_LIBRARY_PATH"] = f"{self.libdir}:{env.get('LD_LIBRARY_PATH', '')}".rstrip(":")
        env.pop("ROCM_PATH", None)
        env.pop("ROCM_HOME", None)
        return env

    def fake_sysfs(self, partitions_per_gpu: dict[int, int], *, cleaner_shader: bool = True) -> FakeSysfs:
        """``<root>/sys/bus/pci/devices/<bdf>/{enforce_isolation,run_cleaner_shader}`` per GPU, and the KFD
        topology node of each device (the stand-in's ``amdsmi_get_gpu_kfd_info`` says node ``index + 1``)."""
        return FakeSysfs(self.sysfs, partitions_per_gpu, cleaner_shader,
                         {i + 1: d.render for i, d in enumerate(self.devices)})


def bdf_name(as_uint: int) -> str:
    """``amdsmi_bdf_t.as_uint`` as the PCI address sysfs names a device by."""
    return (f"{(as_uint >> 16) & 0xFFFF:04x}:{(as_uint >> 8) & 0xFF:02x}:{(as_uint >> 3) & 0x1F:02x}."
            f"{as_uint & 0x7:x}")


def kfd_node(sysfs: Path, node: int, render: int) -> Path:
    """``<sysfs>/class/kfd/kfd/topology/nodes/<node>/properties`` of a GPU node as kfd_topology.c prints it
    (``node_show``: one ``<name> <value>`` per line; ``drm_render_minor`` is the render node's minor)."""
    properties = sysfs / "class/kfd/kfd/topology/nodes" / str(node) / "properties"
    properties.parent.mkdir(parents=True, exist_ok=True)
    properties.write_text(f"cpu_cores_count 0\nsimd_count 152\nmem_banks_count 1\ngfx_target_version 90402\n"
                          f"vendor_id 4098\ndevice_id 29856\ndrm_render_minor {render}\nnum_xcc 1\n", encoding="ascii")
    return properties


class FakeSysfs:
    """The amdgpu process-isolation files of each GPU (a plain directory; the kernel's are attributes).

    process-isolation.rst: ``enforce_isolation`` reads one value per partition ("1 0 1 0") and is
    written with one value per partition; ``run_cleaner_shader`` takes the partition index. A
    real write to ``run_cleaner_shader`` returns once the cleaner shader is scheduled; here the
    file's content after a write is that index (what :meth:`cleaner_runs` counts is the log the
    test keeps by reading it back).
    """

    def __init__(self, root: Path, partitions_per_gpu: dict[int, int], cleaner_shader: bool,
                 render_minors: dict[int, int] | None = None) -> None:
        self.root = root
        self.dirs: dict[int, Path] = {}
        for node, render in (render_minors or {}).items():
            kfd_node(root, node, render)
        for bdf, count in partitions_per_gpu.items():
            d = root / "bus" / "pci" / "devices" / bdf_name(bdf)
            d.mkdir(parents=True, exist_ok=True)
            (d / "enforce_isolation").write_text(" ".join(["0"] * count) + "\n")
            if cleaner_shader:
                (d / "run_cleaner_shader").write_text("")
            self.dirs[bdf] = d

    def isolation(self, bdf: int) -> list[int]:
        return [int(v) for v in (self.dirs[bdf] / "enforce_isolation").read_text().split()]

    def cleaner(self, bdf: int) -> str:
        return (self.dirs[bdf] / "run_cleaner_shader").read_text().strip()


class AmdTenant:
    """A real child process holding a HIP context and an allocation on one device (by ROCr UUID)."""

    def __init__(self, node: AmdNode, hip_uuid: str, *, nbytes: int = 8 * MiB, byte: int = 0x3C,
                 ignore_term: bool = False) -> None:
        import sys

        args = [sys.executable, str(HERE / "tenant.py"), "--bytes", str(nbytes), "--byte", str(byte)]
        if ignore_term:
            args.append("--ignore-term")
        env = {**node.env(), "ROCR_VISIBLE_DEVICES": hip_uuid}
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            self.proc.wait(timeout=10)
            raise RuntimeError(f"tenant did not start: {line!r} {self.proc.stderr.read() if self.proc.stderr else ''}")

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
