"""The real GPU backends (pynvml, cuda-bindings, NVRTC, the CUDA worker) against the stand-in driver.

Each test is a scenario of issue 9 that the simulated backend could not show: the barrier runs
through ``build_runtime(backend="nvml")`` exactly as on a node, with tenants that are real
child processes holding stand-in contexts, and device memory that keeps their bytes.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dra_constructs.agent.backends.base import EnumerationFailed
from dra_constructs.agent.backends.nvml import NvmlDevices
from dra_constructs.agent.config import AgentConfig, KubeSettings
from dra_constructs.agent.kube import Tenant as ClaimTenant
from dra_constructs.agent.runtime import Runtime, build_runtime

from .standin import (
    CI,
    GI,
    GI_1_SLICE,
    GI_1_SLICE_GFX,
    GI_1_SLICE_REV1,
    GI_2_SLICE,
    GPU,
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_NO_PERMISSION,
    MiB,
    Node,
    Tenant,
    preload_nvml,
)

MakeNode = Callable[..., Node]
#: The tenant's pod (its cgroup file names it): the barrier signals only the released claim's pods.
POD = "3c1d5e7f-9a2b-4c6d-8e0f-1a2b3c4d5e6f"


@pytest.fixture
def standin(tmp_path: Path, standin_lib: Path, monkeypatch: pytest.MonkeyPatch) -> MakeNode:
    """Write a stand-in node and point this process (NVML) and its children (CUDA) at it."""
    preload_nvml(standin_lib)

    def make(gpus: list[GPU], **fields: Any) -> Node:
        node = Node(tmp_path / "node", standin_lib, gpus, **fields).write()
        for key, value in node.env().items():
            monkeypatch.setenv(key, value)
        return node

    return make


def agent_config(tmp_path: Path, **fields: Any) -> AgentConfig:
    fields.setdefault("selftest_at_start", False)  # the canary's own tests: test_standin_canary.py
    return AgentConfig(
        node_name="node-a", backend="nvml", grace_period_s=0.3, drain_timeout_s=8, poll_interval_s=0.05,
        fill_timeout_s=60, state_dir=str(tmp_path / "state"), evidence_file=str(tmp_path / "evidence.jsonl"),
        kube=KubeSettings(mode="disabled", kubernetes_version="1.34"), proc_root=str(tmp_path / "node" / "proc"),
        **fields,
    )


def runtime(tmp_path: Path, **fields: Any) -> Runtime:
    return build_runtime(agent_config(tmp_path, **fields), fsync=False)


def a100_mig(uuid: str, minor: int, gis: list[GI], **fields: Any) -> GPU:
    return GPU(uuid, minor=minor, name="NVIDIA A100-SXM4-80GB", arch=80, mig=True, total=81920 * MiB, gis=gis,
               **fields)


# --- 1: names and enumeration errors -----------------------------------------------------------


def test_mig_devices_are_named_as_the_driver_names_them(standin: MakeNode) -> None:
    standin([a100_mig("GPU-a", 0, [
        GI(1, [CI("MIG-a1")], GI_1_SLICE, profile_id=19, placement_start=6, memory_mb=9856),
        GI(2, [CI("MIG-a2")], GI_1_SLICE_REV1, profile_id=20, placement_start=0, memory_mb=9856),
        GI(3, [CI("MIG-a3")], GI_1_SLICE_GFX, profile_id=47, placement_start=1, memory_mb=19968),
        GI(4, [CI("MIG-a4")], GI_2_SLICE, profile_id=14, slices=2, placement_start=2, memory_mb=19968),
    ])])
    names = sorted(d.name for d in NvmlDevices().devices())
    assert names == ["gpu-0-mig-1g10gb-19-6", "gpu-0-mig-1g10gb-me-20-0", "gpu-0-mig-1g20gb-gfx-47-1",
                     "gpu-0-mig-2g20gb-14-2"]


def test_enumeration_errors_are_reported_not_swallowed(standin: MakeNode) -> None:
    standin([
        GPU("GPU-ok", minor=0),
        GPU("GPU-lost", minor=1, error=NVML_ERROR_GPU_IS_LOST, error_call="nvmlDeviceGetMemoryInfo"),
        a100_mig("GPU-m", 2, [
            GI(1, [CI("MIG-m1")], placement_start=0),
            GI(2, [CI("MIG-m2")], placement_start=1, error=NVML_ERROR_NO_PERMISSION,
               error_call="nvmlDeviceGetMigDeviceHandleByIndex"),
        ]),
    ])
    nvml = NvmlDevices()
    result = nvml.enumerate()
    assert sorted(d.name for d in result.devices) == ["gpu-0", "gpu-2-mig-1g10gb-19-0"]
    lost, denied = result.errors
    assert (lost.gpu_index, lost.minor, lost.fatal) == (1, 1, True) and "GPU is lost" in lost.message
    assert (denied.gpu_index, denied.minor, denied.fatal) == (2, 2, False) and "Insufficient Permissions" in str(denied)
    # The agent can tell which claimed names may sit on a part it could not read.
    assert result.may_hide("gpu-1") and result.may_hide("gpu-2-mig-1g10gb-19-1")
    assert not result.may_hide("gpu-0") and not result.complete
    with pytest.raises(EnumerationFailed, match="GPU index 1"):
        nvml.devices()


def test_the_agent_starts_with_a_lost_gpu_and_keeps_the_failure(standin: MakeNode, tmp_path: Path) -> None:
    standin([GPU("GPU-ok", minor=0), GPU("GPU-lost", minor=1, error=NVML_ERROR_GPU_IS_LOST,
                                        error_call="nvmlDeviceGetHandleByIndex_v2")])
    rt = runtime(tmp_path)
    assert [d.name for d in rt.devices] == ["gpu-0"]
    assert rt.enumeration is not None and rt.enumeration.may_hide("gpu-1")
    assert rt.enumeration.errors[0].minor is None  # not even the minor is known: any name may be it


# --- 2: every compute instance of a GPU instance -----------------------------------------------


def test_a_tenant_on_the_second_compute_instance_is_drained(standin: MakeNode, tmp_path: Path) -> None:
    node = standin([a100_mig("GPU-a", 0, [GI(1, [CI("MIG-ci0", 0), CI("MIG-ci1", 1)])])])
    rt = runtime(tmp_path)
    (device,) = rt.devices
    assert device.compute_instance_uuids == ("MIG-ci0", "MIG-ci1")
    tenant = Tenant(node, "MIG-ci1", nbytes=8 * MiB, ignore_term=True, pod=POD)
    try:
        record = rt.barrier.run(device, "deallocated", ClaimTenant("team-a/c1", "team-a", "u1", pods=(POD,)))
        assert tenant.pid in record.pids_sigterm and tenant.pid in record.pids_sigkill
        assert not tenant.alive()
    finally:
        tenant.stop()
    assert record.result == "released", record.reason
    # Compute mode went to both compute instances and back.
    assert node.compute_mode("MIG-ci0") == node.compute_mode("MIG-ci1") == 0


def test_compute_mode_covers_every_compute_instance(standin: MakeNode) -> None:
    """CUDA 13.3 NVML: compute mode is set on each MIG device handle (go-nvml 8b8585b nvml.h)."""
    from dra_constructs.agent.backends.base import ComputeMode

    node = standin([a100_mig("GPU-a", 0, [GI(1, [CI("MIG-ci0", 0), CI("MIG-ci1", 1), CI("MIG-ci2", 2)])])],
                   generation="13.3")
    nvml = NvmlDevices()
    (device,) = nvml.devices()
    nvml.set_compute_mode(device, ComputeMode.PROHIBITED)
    assert [node.compute_mode(f"MIG-ci{i}") for i in range(3)] == [2, 2, 2]
    nvml.set_compute_mode(device, ComputeMode.EXCLUSIVE_PROCESS)  # our worker's CI only; the others stay shut
    assert [node.compute_mode(f"MIG-ci{i}") for i in range(3)] == [3, 2, 2]
    nvml.set_compute_mode(device, ComputeMode.DEFAULT)
    assert [node.compute_mode(f"MIG-ci{i}") for i in range(3)] == [0, 0, 0]


@pytest.mark.parametrize("generation", ["535", "550", "570", "580"])
def test_compute_mode_on_mig_is_refused_before_cuda_13_3(standin: MakeNode, generation: str) -> None:
    """R535..R580: "On MIG-enabled GPUs, compute mode would be set to DEFAULT and changing it is not supported"."""
    import pynvml

    from dra_constructs.agent.backends.base import ComputeMode, ComputeModeUnsupported

    node = standin([a100_mig("GPU-a", 0, [GI(1, [CI("MIG-ci0", 0), CI("MIG-ci1", 1)])])], generation=generation)
    nvml = NvmlDevices()
    assert pynvml.nvmlSystemGetDriverVersion().startswith(generation)
    assert pynvml.nvmlSystemGetCudaDriverVersion() < 13030
    (device,) = nvml.devices()
    for mode in (ComputeMode.PROHIBITED, ComputeMode.EXCLUSIVE_PROCESS):
        with pytest.raises(ComputeModeUnsupported, match="Not Supported"):
            nvml.set_compute_mode(device, mode)
    nvml.set_compute_mode(device, ComputeMode.DEFAULT)  # it is DEFAULT: not an error
    assert node.compute_mode("MIG-ci0") == node.compute_mode("MIG-ci1") == 0


# --- 4: memory nobody lists, and what coverage does not include --------------------------------


def test_memory_held_by_an_unlisted_process_quarantines(standin: MakeNode, tmp_path: Path) -> None:
    standin([GPU("GPU-a", total=48 * MiB, unlisted_used=32 * MiB)])
    rt = runtime(tmp_path)
    record = rt.barrier.run(rt.devices[0], "deallocated")
    assert record.result == "quarantined"
    assert record.reason is not None and record.reason.startswith("unaccounted memory: 33554432 bytes")
    assert record.bytes_free_before_context == 14 * MiB and record.bytes_reserved == 2 * MiB


def test_a_hidden_holder_below_one_percent_is_not_released(standin: MakeNode, tmp_path: Path) -> None:
    """Review r15: 2 MiB (0.8 % of 256 MiB) held by a process NVML does not list, over residue.

    The old 1 % epsilon passed it and recorded coverage 1.0 of free memory; the allowance is now
    absolute (1 MiB, below one 2 MiB allocation granule), so one hidden allocation fails the barrier.
    """
    node = standin([GPU("GPU-a", total=256 * MiB, reserved=2 * MiB, unlisted_used=2 * MiB)], residue_byte=0x5A)
    rt = runtime(tmp_path)
    record = rt.barrier.run(rt.devices[0], "deallocated")
    assert record.result == "quarantined", record.coverage
    assert (record.reason or "").startswith("unaccounted memory: 2097152 bytes")
    assert record.bytes_unaccounted == 2 * MiB and record.bytes_usable == 254 * MiB
    assert node.memory().count(0x5A) >= 2 * MiB  # what it held was never read: not released


def test_evidence_says_what_the_fill_did_not_cover(standin: MakeNode, tmp_path: Path) -> None:
    node = standin([GPU("GPU-a", total=64 * MiB, context_overhead=4 * MiB)], residue_byte=0xAB)
    rt = runtime(tmp_path)
    record = rt.barrier.run(rt.devices[0], "deallocated")
    assert record.result == "released", record.reason
    assert record.bytes_free_before_context == 62 * MiB and record.bytes_context == 4 * MiB  # our context
    assert record.coverage_of_free == 1.0 and record.bytes_verified == record.bytes_zeroed == 58 * MiB
    assert record.bytes_usable == 62 * MiB and record.bytes_unaccounted == 0
    assert record.coverage == pytest.approx(58 / 62)  # of what the device holds: our context was not read
    assert record.coverage_of_total == pytest.approx(58 / 64)
    assert record.bytes_not_covered == 6 * MiB  # RM's reservation and our context
    # What is still non-zero on the device (RM's reservation, our context) is within what was reported.
    left = sum(1 for b in node.memory() if b)
    assert 0 < left <= record.bytes_not_covered
    assert record.fill_bytes_per_s is not None and record.control_found == record.control_planted == 2


# --- 5: NVRTC is installed by the extra, and its absence is named --------------------------------


def test_a_missing_nvrtc_is_named_in_the_reason(standin: MakeNode, tmp_path: Path, nvrtc_less_python: str) -> None:
    standin([GPU("GPU-a")])
    rt = build_runtime(agent_config(tmp_path), fsync=False)
    from dra_constructs.agent.backends.cuda import CudaScrubber

    rt.barrier.deps.scrubber = CudaScrubber(python=nvrtc_less_python)
    record = rt.barrier.run(rt.devices[0], "deallocated")
    assert record.result == "quarantined"
    assert record.reason is not None and "NVRTC (libnvrtc.so.12) cannot be loaded" in record.reason
    assert "nvidia-cuda-nvrtc-cu12" in record.reason and "exited with code" not in record.reason


def test_the_gpu_extra_provides_the_nvrtc_the_worker_loads() -> None:
    import tomllib
    from importlib.metadata import PackageNotFoundError, distribution

    from cuda.pathfinder import load_nvidia_dynamic_lib
    from packaging.requirements import Requirement

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    extra = [Requirement(r).name for r in pyproject["project"]["optional-dependencies"]["gpu"]]
    loaded = Path(load_nvidia_dynamic_lib("nvrtc").abs_path).resolve()
    owners = []
    for name in extra:
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        if any(Path(str(dist.locate_file(f))).resolve() == loaded for f in dist.files or []):
            owners.append(name)
    assert owners == ["nvidia-cuda-nvrtc-cu12"]


# --- 6: a kernel image every driver loads --------------------------------------------------------


@pytest.mark.parametrize(("arch", "ptx_isa_max", "expected"), [
    (90, 87, "cubin:sm_90"),     # R570 (ISA 8.7) with NVRTC 12.9 (ISA 8.8): PTX would be refused
    (120, 87, "cubin:sm_120"),   # Blackwell cubins (ELF ABI v8)
    (130, 90, "ptx:sm_121"),     # an architecture newer than NVRTC: its PTX, for a newer driver
])
def test_the_verify_kernel_loads_on_a_driver_older_than_nvrtc(standin: MakeNode, tmp_path: Path, arch: int,
                                                               ptx_isa_max: int, expected: str) -> None:
    from cuda.bindings import nvrtc

    standin([GPU("GPU-a", arch=arch)], ptx_isa_max=ptx_isa_max)
    rt = runtime(tmp_path)
    record = rt.barrier.run(rt.devices[0], "deallocated")
    assert record.result == "released", record.reason
    _, major, minor = nvrtc.nvrtcVersion()
    kind, sm = expected.split(":")
    cache = sorted(p.name for p in (tmp_path / "state" / "ptx").iterdir())
    assert len(cache) == 1 and cache[0].startswith(f"count_words-{sm.replace('_', '')}-nvrtc{major}.{minor}-")
    assert cache[0].endswith(f".{kind}")  # and no temporary file was left behind


def test_the_verify_kernel_uses_16_byte_loads() -> None:
    from cuda.bindings import nvrtc

    from dra_constructs.agent.backends.cuda import CudaContext

    ctx = CudaContext.__new__(CudaContext)
    ctx.nvrtc = nvrtc
    ptx = ctx._compile("ptx", 90).decode()
    assert "ld.global.nc.v2.u64" in ptx or "ld.global.v2.u64" in ptx


# --- 7: refused signals --------------------------------------------------------------------------


def _foreign_pid() -> int | None:
    """A live process owned by another user (PID 1 on most CI runners), if any."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid != os.geteuid():
                    return int(entry.name)
            except OSError:
                continue
    return None


def test_a_refused_signal_is_named(tmp_path: Path) -> None:
    """A real EPERM from the kernel: as root, from a child dropped to uid 65534 against a root-owned
    sleeper; otherwise signal 0 (harmless) to a process of another user."""
    import subprocess
    import sys

    from dra_constructs.agent.backends.base import OsSignaller, SignalRefused

    if os.geteuid() != 0:
        target = _foreign_pid()
        if target is None:
            pytest.fail("no process of another user to get a real EPERM from")
        with pytest.raises(SignalRefused, match=rf"kill\({target}, 0\): refused by the kernel \(EPERM\)"):
            signaller = OsSignaller()
            signaller.pin(target)  # (False without pidfds: then signalled by number)
            signaller.signal(target, 0)
        return
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    probe = (  # import first: the unprivileged user may not read the interpreter's files
        "import os, signal, sys\n"
        "from dra_constructs.agent.backends.base import OsSignaller, SignalRefused\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "try:\n"
        f"    signaller = OsSignaller(); signaller.pin({sleeper.pid})\n"
        f"    signaller.signal({sleeper.pid}, signal.SIGKILL)\n"
        "except SignalRefused as error:\n"
        "    print(error)\n"
    )
    try:
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    finally:
        sleeper.kill()
        sleeper.wait()
    assert f"kill({sleeper.pid}, SIGKILL): refused by the kernel (EPERM)" in out.stdout
    assert "target uid 0, agent euid 65534" in out.stdout and "AppArmor/SELinux" in out.stdout


def test_sigkill_after_sigterm_goes_through_the_same_pidfd(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess
    import sys

    from dra_constructs.agent.backends.base import OsSignaller

    child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                              "signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    signaller = OsSignaller()
    sent: list[int] = []
    real = signal.pidfd_send_signal

    def spy(fd: int, sig: int, *args: Any) -> None:
        sent.append(fd)
        real(fd, sig, *args)

    monkeypatch.setattr(signal, "pidfd_send_signal", spy)
    monkeypatch.setattr(os, "kill", lambda *_: pytest.fail("os.kill used although pidfds exist"))
    try:
        assert signaller.pin(child.pid)  # the drain pins before the listing that names it
        assert signaller.signal(child.pid, signal.SIGTERM)
        assert signaller.signal(child.pid, signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    assert sent[0] == sent[-1] and len(set(sent)) == 1  # one pidfd, opened before the grace period
    assert signaller.signal(child.pid, signal.SIGKILL) is False  # gone (and reaped)
    assert not signaller._fds  # no pidfd kept for a process that is gone


# --- 8: workers bounded by memory ------------------------------------------------------------------


def test_workers_are_bounded_by_the_memory_limit(standin: MakeNode, tmp_path: Path) -> None:
    standin([GPU("GPU-a")])
    rt = runtime(tmp_path, memory_limit_bytes=2 << 30, max_parallel=64)
    assert rt.barrier.deps.scrubber.max_workers == 9  # (2 GiB - 256 MiB) // 192 MiB  # type: ignore[attr-defined]


def test_the_cgroup_memory_limit_is_read(tmp_path: Path) -> None:
    from dra_constructs.agent.limits import cgroup_memory_limit, worker_slots

    (tmp_path / "memory.max").write_text("max\n")
    assert cgroup_memory_limit(tmp_path) is None
    (tmp_path / "memory.max").write_text("2147483648\n")
    assert cgroup_memory_limit(tmp_path) == 2 << 30
    (tmp_path / "memory.max").unlink()
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text(str(9223372036854771712))  # v1: unlimited
    assert cgroup_memory_limit(tmp_path) is None
    config = agent_config(tmp_path)
    assert worker_slots(config, 2 << 30) == 9 and worker_slots(config, 128 << 20) == 1
    assert worker_slots(config, 64 << 30) == 64  # never above max_parallel


def test_a_barrier_waits_for_a_free_worker_slot(standin: MakeNode) -> None:
    import threading

    from dra_constructs.agent.backends.cuda import CudaScrubber

    standin([GPU("GPU-a"), GPU("GPU-b", minor=1)])
    devices = NvmlDevices().devices()
    scrubber = CudaScrubber(max_workers=1)
    first = scrubber.open(devices[0], 60)
    opened = threading.Event()
    second: list[Any] = []

    def open_second() -> None:
        second.append(scrubber.open(devices[1], 60))
        opened.set()

    thread = threading.Thread(target=open_second)
    thread.start()
    try:
        assert not opened.wait(1.0)  # one worker lives at a time
    finally:
        first.close()
    assert opened.wait(30)
    thread.join()
    second[0].close()


# --- 10: the verify proves itself ------------------------------------------------------------------


def test_a_verify_kernel_that_reads_nothing_fails_the_positive_control(standin: MakeNode, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    standin([GPU("GPU-a")])
    monkeypatch.setenv("DRA_STANDIN_KERNEL_FAULT", "zero-length")  # the kernel sees n = 0, reads nothing
    rt = runtime(tmp_path)
    record = rt.barrier.run(rt.devices[0], "deallocated")
    assert record.result == "quarantined"
    assert record.reason is not None and record.reason.startswith("verify positive control failed")
    assert record.control_planted == 2 and record.control_found == 0


def test_fill_bandwidth_is_the_memset_alone(standin: MakeNode, tmp_path: Path) -> None:
    from dra_constructs.agent.backends.cuda import CudaScrubber

    standin([GPU("GPU-a")])
    session = CudaScrubber().open(NvmlDevices().devices()[0], 60)
    try:
        fill = session.fill()
        verify = session.verify()
    finally:
        session.close()
    assert fill.memset_seconds is not None and 0 < fill.memset_seconds <= fill.seconds
    assert verify.bytes_verified == fill.bytes_zeroed and verify.control_found == verify.control_planted == 2


def test_a_pid_whose_pidfd_saw_it_end_is_never_signalled_again_until_pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pruned (exited) or SIGKILLed PID is not reopened by number: the number may be another process's now."""
    import subprocess
    import sys

    from dra_constructs.agent.backends.base import OsSignaller

    signaller = OsSignaller()
    if not signaller._pidfd:
        pytest.skip("no pidfds on this kernel/Python")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    assert signaller.pin(child.pid)
    child.kill()
    child.wait()  # reaped: its pidfd now reports it gone
    opened: list[int] = []
    real_open = os.pidfd_open
    monkeypatch.setattr(os, "pidfd_open", lambda pid, *a: opened.append(pid) or real_open(pid, *a))
    assert signaller.signal(child.pid, signal.SIGTERM) is False
    assert opened == []  # refused without opening a pidfd for whatever holds that number now
    again = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert signaller.signal(again.pid, signal.SIGKILL) is False  # never pinned: not signalled by number
        assert again.poll() is None and opened == []
        assert signaller.pin(again.pid)
        assert signaller.signal(again.pid, signal.SIGKILL)  # a different, live PID, pinned, is signalled
        again.wait(10)
        assert signaller.signal(again.pid, signal.SIGKILL) is False  # after SIGKILL: only through a new pin
    finally:
        if again.poll() is None:
            again.kill()


def test_outside_the_host_pid_namespace_nothing_is_signalled_and_the_device_is_quarantined(
        standin: MakeNode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NVML's PIDs are host PIDs: without hostPID a signal by number could hit another process (fail closed)."""
    from dra_constructs.agent.backends import base

    node = standin([GPU("GPU-a", total=256 * MiB)])
    monkeypatch.setattr(base, "host_pid_namespace", lambda proc=None: False)
    rt = runtime(tmp_path)
    (device,) = rt.devices
    tenant = Tenant(node, "GPU-a", nbytes=8 * MiB, pod=POD)
    try:
        record = rt.barrier.run(device, "deallocated", ClaimTenant("team-a/c1", "team-a", "u1", pods=(POD,)))
        assert tenant.alive(), "a process was signalled although the agent cannot number host PIDs"
    finally:
        tenant.stop()
    assert record.result == "quarantined"
    assert "host PID namespace" in (record.reason or ""), record.reason
    assert record.pids_sigterm == [] and record.pids_sigkill == []
