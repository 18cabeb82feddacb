"""The AMD backend on stand-in libamd_smi.so / libamdhip64.so through the real amdsmi and hip-python.

The stand-ins (tests/sanitizer_runtime/standin_amd) are built with gcc; the real bindings load
them as they load ROCm: amdsmi's wrapper from ``$ROCM_PATH/lib`` (this process) or the dynamic
loader (children), hip-python by ``dlopen("libamdhip64.so")`` in the HIP worker child. sysfs is a
directory tree with the amdgpu process-isolation files (``enforce_isolation``,
``run_cleaner_shader``) as Documentation/gpu/amdgpu/process-isolation.rst describes them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dra_constructs.agent.backends.base import BackendError, ComputeMode, ComputeModeUnsupported

from .standin_amd import AMDSMI_STATUS_NO_PERM, AmdDevice, AmdNode, AmdTenant, MiB, build
from .test_standin_backends import POD
from .test_standin_devhandles import OTHER, Holder

if TYPE_CHECKING:
    from dra_constructs.agent.runtime import Runtime

REASON = "the amdsmi and hip-python wheels (dev extras) are not installed"


def _bindings_missing() -> bool:
    return importlib.util.find_spec("amdsmi") is None or importlib.util.find_spec("hip") is None


@pytest.fixture(scope="module")
def amd_lib(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The stand-ins, built once; amdsmi imported against them (``$ROCM_PATH/lib/libamd_smi.so``)."""
    if _bindings_missing():
        if os.environ.get("CI") == "true":  # they are dev extras and install without ROCm: a CI without them is broken
            pytest.fail(REASON)
        pytest.skip(REASON)
    root = tmp_path_factory.mktemp("rocm")
    lib = build(root / "lib")
    saved = os.environ.get("ROCM_PATH")
    os.environ["ROCM_PATH"] = str(root)
    try:
        import amdsmi  # noqa: F401  (binds libamd_smi.so now, from $ROCM_PATH/lib)
    finally:
        if saved is None:
            os.environ.pop("ROCM_PATH", None)
        else:
            os.environ["ROCM_PATH"] = saved
    yield lib


def cpx_pair(**extra: object) -> list[AmdDevice]:
    """Two CPX partitions of one MI300X (one PCI device), as the AMD DRA driver names them gpu-1-129, gpu-2-130."""
    return [AmdDevice("uuid-p0", "GPU-00000000000000a0", card=1, render=129, partition_id=0,
                      compute_partition="CPX", memory_partition="NPS4", **extra),  # type: ignore[arg-type]
            AmdDevice("uuid-p1", "GPU-00000000000000a1", card=2, render=130, partition_id=1,
                      compute_partition="CPX", memory_partition="NPS4", **extra)]  # type: ignore[arg-type]


@pytest.fixture
def node(tmp_path: Path, amd_lib: Path, monkeypatch: pytest.MonkeyPatch) -> AmdNode:
    n = AmdNode(tmp_path / "node", amd_lib, cpx_pair())
    n.write()
    monkeypatch.setenv("DRA_AMD_STANDIN_CONFIG", str(n.config_path))
    monkeypatch.setenv("LD_LIBRARY_PATH", f"{amd_lib}:{os.environ.get('LD_LIBRARY_PATH', '')}")
    return n


def _smi(node: AmdNode):  # type: ignore[no-untyped-def]
    from dra_constructs.agent.backends.amd_smi import AmdSmiDevices

    node.write()
    return AmdSmiDevices()


def test_partitions_are_named_as_the_dra_driver_names_them(node: AmdNode) -> None:
    smi = _smi(node)
    result = smi.enumerate()
    assert result.complete
    assert [(d.name, d.uuid, d.memory_bytes) for d in result.devices] == [
        ("gpu-1-129", "uuid-p0", 64 * MiB), ("gpu-2-130", "uuid-p1", 64 * MiB)]
    facts = smi.facts(result.devices[1])
    assert (facts.partition, facts.hip_uuid, facts.compute_partition, facts.memory_partition) == (
        1, "GPU-00000000000000a1", "CPX", "NPS4")
    assert smi.drm_minors(result.devices[1]) == (2, 130) and smi.kfd_node(result.devices[1]) == 2  # node_id
    assert facts.bdf == 0x0C00  # both partitions are one PCI device: one enforce_isolation file


def test_partitions_reporting_one_uuid_are_not_mixed_up(node: AmdNode) -> None:
    """Before ROCm 7.12 the compute partitions of one GPU could report one UUID (ROCm/amdsmi#132; AMD SMI
    added the partition to it in rocm-systems#3977): the second is an enumeration error, never given the
    first one's render node, and a device whose UUID names another device in AMD SMI has no facts."""
    from dra_constructs.agent.devices import DeviceInfo

    node.devices[1].uuid = node.devices[0].uuid
    smi = _smi(node)
    result = smi.enumerate()
    assert [d.name for d in result.devices] == ["gpu-1-129"] and not result.complete
    assert "gpu-2-130 reports the UUID uuid-p0 of gpu-1-129" in result.errors[0].message
    assert smi.drm_minors(result.devices[0]) == (1, 129)
    with pytest.raises(BackendError, match="names gpu-1-129"):
        smi.drm_minors(DeviceInfo("gpu-2-130", "uuid-p0", 2, 64 * MiB))


def test_a_partition_amd_smi_cannot_read_hides_every_name(node: AmdNode) -> None:
    node.devices[1].error, node.devices[1].error_call = AMDSMI_STATUS_NO_PERM, "amdsmi_get_gpu_enumeration_info"
    result = _smi(node).enumerate()
    assert [d.name for d in result.devices] == ["gpu-1-129"]
    (error,) = result.errors
    assert error.op == "amdsmi_get_gpu_enumeration_info" and "status 10" in error.message
    assert result.may_hide("gpu-2-130") and result.may_hide("gpu-9-137")  # no name known: every claim stays guarded


def test_processes_and_memory_come_from_amd_smi(node: AmdNode) -> None:
    smi = _smi(node)
    device = smi.devices()[1]
    tenant = AmdTenant(node, "GPU-00000000000000a1", nbytes=8 * MiB)
    try:
        assert smi.processes(device) == [tenant.pid]
        assert smi.processes(smi.devices()[0]) == []  # listed on its own partition only
        memory = smi.memory(device)
        assert memory.used == 8 * MiB + 4 * MiB and memory.free == memory.total - memory.used
    finally:
        tenant.stop()
    assert smi.processes(device) == []


def test_there_is_no_compute_mode_to_guard_with(node: AmdNode) -> None:
    smi = _smi(node)
    device = smi.devices()[0]
    smi.set_compute_mode(device, ComputeMode.DEFAULT)
    with pytest.raises(ComputeModeUnsupported, match="device taint is the guard"):
        smi.set_compute_mode(device, ComputeMode.PROHIBITED)


def test_the_cleaner_shader_runs_on_the_partition_with_isolation_enforced(node: AmdNode) -> None:
    from dra_constructs.agent.backends.amd_isolation import AmdIsolation

    sysfs = node.fake_sysfs({0x0C00: 2})
    seen = AmdIsolation(node.sysfs).clean(0x0C00, 1)
    assert sysfs.isolation(0x0C00) == [0, 1]  # only this partition's value changed
    assert sysfs.cleaner(0x0C00) == "1"
    assert seen == {"pci_address": "0000:0c:00.0", "partition": 1, "enforce_isolation_found": 0,
                    "enforce_isolation": 1, "cleaner_shader_ran": True}
    (sysfs.dirs[0x0C00] / "enforce_isolation").write_text("2 2\n")  # legacy isolation: no cleaner shader
    AmdIsolation(node.sysfs, enforce=False).clean(0x0C00, 0)
    assert sysfs.isolation(0x0C00) == [2, 2]  # enforce off: checked, left alone
    with pytest.raises(BackendError, match="partition 4 is not among them"):
        AmdIsolation(node.sysfs).clean(0x0C00, 4)


def test_a_kernel_without_the_cleaner_shader_fails_closed(node: AmdNode) -> None:
    from dra_constructs.agent.backends.amd_isolation import AmdIsolation

    node.fake_sysfs({0x0C00: 2}, cleaner_shader=False)
    with pytest.raises(BackendError, match="CVE-2023-4969"):
        AmdIsolation(node.sysfs).clean(0x0C00, 0)
    assert not (node.sysfs / "bus/pci/devices/0000:0c:00.0/run_cleaner_shader").exists()  # never created
    with pytest.raises(BackendError, match="no process isolation"):
        AmdIsolation(node.root / "empty").clean(0x0C00, 0)


def _scrubber(node: AmdNode):  # type: ignore[no-untyped-def]
    from dra_constructs.agent.backends.amd_hip import HipScrubber
    from dra_constructs.agent.backends.amd_isolation import AmdIsolation

    smi = _smi(node)
    return smi, HipScrubber(smi.facts, AmdIsolation(node.sysfs))


def test_the_hip_worker_zeroes_and_verifies_one_partition(node: AmdNode) -> None:
    node.residue_byte = 0x5A  # the last tenant's bytes everywhere
    sysfs = node.fake_sysfs({0x0C00: 2})
    smi, scrubber = _scrubber(node)
    device = smi.devices()[1]
    session = scrubber.open(device, 60)
    try:
        assert smi.processes(device) == [session.pid]  # exactly this partition, nobody else's
        assert smi.processes(smi.devices()[0]) == []
        fill = session.fill()
        result = session.verify()
    finally:
        session.close()
    assert fill.bytes_total == 64 * MiB and fill.bytes_zeroed == 60 * MiB == fill.bytes_free
    assert result.nonzero_words == 0 and result.bytes_verified == fill.bytes_zeroed
    assert result.control_found == result.control_planted > 0
    assert sysfs.isolation(0x0C00) == [0, 1] and sysfs.cleaner(0x0C00) == "1"
    assert scrubber.cleaned["uuid-p1"]["cleaner_shader_ran"] is True
    assert node.memory(1)[4 * MiB:].count(0x5A) == 0  # all but the worker's context overhead (the stand-in's model)


def test_a_fill_that_skips_bytes_is_caught_by_the_verify(node: AmdNode) -> None:
    node.residue_byte, node.memset_skip_tail = 0x5A, 4096
    node.fake_sysfs({0x0C00: 2})
    smi, scrubber = _scrubber(node)
    session = scrubber.open(smi.devices()[0], 60)
    try:
        session.fill()
        result = session.verify()
    finally:
        session.close()
    assert result.nonzero_words >= 4096 // 8 - 1  # the residue left at the end of an allocation
    assert result.control_found == result.control_planted


def test_a_worker_that_would_see_another_device_refuses(node: AmdNode) -> None:
    from dra_constructs.agent.backends.amd_hip import HipScrubber
    from dra_constructs.agent.backends.amd_isolation import AmdIsolation
    from dra_constructs.agent.backends.amd_smi import AmdFacts

    node.fake_sysfs({0x0C00: 2})
    smi = _smi(node)
    device = smi.devices()[0]
    wrong = AmdFacts(0x0C00, 0, "GPU-00000000000000ff", None, 1, 129, "CPX", "NPS4")
    with pytest.raises(BackendError, match="hipErrorNoDevice"):
        HipScrubber(lambda _d: wrong, AmdIsolation(node.sysfs)).open(device, 60)


def test_a_worker_pinned_only_by_a_hip_ordinal_is_refused(node: AmdNode) -> None:
    """No HIP UUID from amd-smi: an ordinal alone cannot be checked inside the worker (here amd-smi's
    ordinal 1 is the other partition): filling it would prove nothing about this device."""
    from dra_constructs.agent.backends.amd_hip import HipScrubber
    from dra_constructs.agent.backends.amd_isolation import AmdIsolation
    from dra_constructs.agent.backends.amd_smi import AmdFacts

    node.fake_sysfs({0x0C00: 2})
    smi = _smi(node)
    device = smi.devices()[0]
    ordinal_only = AmdFacts(0x0C00, 0, "", 1, 1, 129, "CPX", "NPS4")
    with pytest.raises(BackendError, match="no HIP UUID") as raised:
        HipScrubber(lambda _d: ordinal_only, AmdIsolation(node.sysfs)).open(device, 60)
    assert raised.value.fatal


def test_the_zipapp_sanitizes_a_cpx_partition_end_to_end(tmp_path: Path, node: AmdNode) -> None:
    from dra_constructs.agent.zipapp import build_zipapp

    node.residue_byte = 0x00
    node.write()
    sysfs = node.fake_sysfs({0x0C00: 2})
    pyz = tmp_path / "agent.pyz"
    pyz.write_bytes(build_zipapp())
    config = tmp_path / "agent.yaml"
    config.write_text(f"node_name: node-a\nbackend: amd\nstate_dir: {tmp_path}/state\ngrace_period_s: 0.3\n"
                      f"drain_timeout_s: 8\npoll_interval_s: 0.05\nevidence_file: {tmp_path}/evidence.jsonl\n"
                      f"proc_root: {node.proc_root}\n"  # the device-handle scan reads it (this machine's /proc: no)
                      f"amd: {{sysfs_root: {node.sysfs}}}\nkube: {{mode: disabled, kubernetes_version: '1.34'}}\n")
    env = {k: v for k, v in node.env().items() if k != "PYTHONPATH"}
    tenant = AmdTenant(node, "GPU-00000000000000a1", nbytes=16 * MiB, byte=0x3C, ignore_term=True)

    def sanitizer(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-I", str(pyz), *args, "--config", str(config), "--device",
                               "gpu-2-130"], env=env, capture_output=True, text=True, timeout=120)

    try:
        refused = sanitizer("once")  # a hand-run barrier owns nobody's processes: it kills none
        assert tenant.alive()
    finally:
        tenant.stop()
    assert refused.returncode == 1, refused.stderr[-2000:]
    record = json.loads(refused.stdout)
    assert record["result"] == "quarantined" and record["reason"].startswith("foreign contexts")
    assert sysfs.cleaner(0x0C00) == ""  # nothing was cleaned while a foreign process held the partition
    out = sanitizer("release", "--reason", "the stray process is gone")
    assert out.returncode == 0, out.stderr[-2000:]
    record = json.loads(out.stdout)
    assert record["result"] == "released"
    assert record["control_found"] == record["control_planted"] > 0 and record["nonzero_words"] == 0
    assert record["bytes_verified"] == record["bytes_zeroed"] > 0 and record["coverage_of_free"] == 1.0
    assert sysfs.isolation(0x0C00) == [0, 1] and sysfs.cleaner(0x0C00) == "1"
    attestation = record["attestation"]
    assert attestation["driver_version"] == "amdgpu 6.12.12"
    assert attestation["amd_isolation"]["pci_address"] == "0000:0c:00.0"
    assert attestation["amd_isolation"]["partition"] == 1 and attestation["amd_isolation"]["ras_enabled"] is True
    assert bytes([0x3C]) * 64 not in node.memory(1)  # the tenant's bytes are gone


def test_an_amd_node_refuses_a_cold_reset_policy_and_has_its_own_defaults() -> None:
    from pydantic import ValidationError

    from dra_constructs.agent.config import AMD_FILL_TIMEOUT_S, AgentConfig

    with pytest.raises(ValidationError, match="XGMI hive"):
        AgentConfig(node_name="n", backend="amd", partition_reset="gpu")
    with pytest.raises(ValidationError, match="no AMD implementation"):
        AgentConfig(node_name="n", backend="amd", selftest_at_start=True)
    amd = AgentConfig(node_name="n", backend="amd")
    assert (amd.selftest_at_start, amd.fill_timeout_s) == (False, AMD_FILL_TIMEOUT_S)
    assert AgentConfig(node_name="n", backend="amd", fill_timeout_s=60).fill_timeout_s == 60
    nvidia = AgentConfig(node_name="n")
    assert (nvidia.selftest_at_start, nvidia.fill_timeout_s) == (True, 120)


def _amd_runtime(tmp_path: Path, node: AmdNode, **settings: object) -> Runtime:
    """The agent's runtime with the AMD backends on the stand-in (proc_root: the node's, with its /proc/devices)."""
    from dra_constructs.agent.config import AgentConfig, KubeSettings
    from dra_constructs.agent.runtime import build_runtime

    node.write()
    fields: dict[str, Any] = {"kube": KubeSettings(mode="disabled", kubernetes_version="1.34"), **settings}
    config = AgentConfig(
        node_name="node-a", backend="amd", grace_period_s=0.3, drain_timeout_s=8, poll_interval_s=0.05,
        fill_timeout_s=60, state_dir=str(tmp_path / "state"), evidence_file=str(tmp_path / "evidence.jsonl"),
        proc_root=str(node.proc_root), amd={"sysfs_root": str(node.sysfs)}, **fields)  # type: ignore[arg-type]
    return build_runtime(config, fsync=False)


def _allocated_partition(tmp_path: Path, node: AmdNode) -> tuple[Runtime, Any, Any]:
    """Partition gpu-2-130 of a CPX GPU, released once, then allocated to team-a/c1: the runtime, device and claim."""
    from dra_constructs.agent.kube import Tenant as ClaimTenant

    node.residue_byte = 0x00
    node.fake_sysfs({0x0C00: 2})
    rt = _amd_runtime(tmp_path, node)
    device = rt.device("gpu-2-130")
    assert rt.barrier.run(device, "startup-unknown").result == "released"
    claim = ClaimTenant("team-a/c1", "team-a", "u1", pods=(POD,))
    rt.barrier.mark_allocated(device, claim)
    return rt, device, claim


def test_a_released_claim_is_drained_cleaned_filled_and_verified(tmp_path: Path, node: AmdNode) -> None:
    """The barrier with the AMD backends: the claim's tenant (its pod's cgroup) is killed, the partition cleaned."""
    from dra_constructs.agent.kube import Tenant as ClaimTenant

    from .standin import cgroup

    node.residue_byte = 0x00
    sysfs = node.fake_sysfs({0x0C00: 2})
    rt = _amd_runtime(tmp_path, node)
    device = rt.device("gpu-2-130")
    assert rt.barrier.run(device, "startup-unknown").result == "released"
    rt.barrier.mark_allocated(device, ClaimTenant("team-a/c1", "team-a", "u1", pods=(POD,)))
    tenant = AmdTenant(node, "GPU-00000000000000a1", nbytes=8 * MiB, byte=0x3C, ignore_term=True)
    cgroup(node, tenant.pid, POD)  # type: ignore[arg-type]
    try:
        record = rt.barrier.run(device, "deallocated", ClaimTenant("team-a/c1", "team-a", "u1", pods=(POD,)))
    finally:
        tenant.stop()
    assert tenant.pid in record.pids_sigterm and tenant.pid in record.pids_sigkill  # SIGTERM ignored: SIGKILL
    assert record.result == "released", record.reason
    assert record.nonzero_words == 0 and record.control_found == record.control_planted > 0
    assert record.compute_mode_guard is not True  # there is none on AMD: the record does not claim one
    assert any("no compute-mode guard" in w for w in record.warnings)
    assert record.attestation is not None and record.attestation.amd_isolation is not None
    assert record.attestation.amd_isolation["enforce_isolation"] == 1
    assert sysfs.isolation(0x0C00) == [0, 1] and sysfs.cleaner(0x0C00) == "1"
    assert bytes([0x3C]) * 64 not in node.memory(1)


def test_health_reads_ecc_over_amd_smi_and_says_what_it_cannot(node: AmdNode) -> None:
    from dra_constructs.agent.backends.amd_health import AmdHealth
    from dra_constructs.agent.health import check

    node.devices[0].ecc_uncorrectable = 3
    node.devices[1].error, node.devices[1].error_call = 2, "amdsmi_get_gpu_total_ecc_count"  # NOT_SUPPORTED
    smi = _smi(node)
    first, second = smi.devices()
    health = AmdHealth(smi)
    reads = health.read(first, ("ecc_mode", "ecc_volatile_uncorrected", "driver_version", "xid_count"))
    assert (reads["ecc_mode"].value, reads["ecc_volatile_uncorrected"].value) == (True, 3)
    assert reads["driver_version"].value == "amdgpu 6.12.12" and reads["xid_count"].unsupported
    report = check(health, first, {"ecc_volatile_uncorrected": 1}, require_ecc=True)
    assert any(f.startswith("ecc-uncorrected: 2 ") for f in report.failures)  # 1 -> 3 during the claim
    unsupported = health.read(second, ("ecc_volatile_uncorrected",))["ecc_volatile_uncorrected"]
    assert unsupported.unsupported and "status 2" in str(unsupported.error)
    gates = {g.gate: g.status for g in check(health, second, None, require_ecc=True).gates}
    assert gates["ecc-uncorrected"] == "unavailable" and gates["recovery-action"] == "unavailable"


def test_a_kfd_holder_of_another_pod_blocks_the_release_and_is_never_signalled(tmp_path: Path,
                                                                              node: AmdNode) -> None:
    """A co-tenant's process holding /dev/kfd alone may use any partition (KFD keeps the render file it bound):
    the release waits for it, reported, never signalled; once it is gone the quarantine clears itself."""
    rt, device, claim = _allocated_partition(tmp_path, node)
    kfd = node.dev("kfd")
    other = Holder(node, kfd, pod=OTHER)  # type: ignore[arg-type]  # AMD SMI does not list it
    try:
        record = rt.barrier.run(device, "deallocated", claim)
        assert other.alive()
    finally:
        other.stop()
    assert record.result == "quarantined" and str(record.reason).startswith("foreign contexts"), record.reason
    assert other.pid not in [*record.pids_sigterm, *record.pids_sigkill]
    assert [(p["pid"], p["device_nodes"], p["nvml_listed"]) for p in record.foreign_processes] == [
        (other.pid, [kfd], False)]
    assert record.device_handle_scan is not None
    assert record.device_handle_scan["nodes"] == ["/dev/dri/renderD130", "/dev/dri/card2", "/dev/kfd"]
    again = rt.barrier.recover(device)  # it is gone: the self-clearing quarantine runs the barrier again
    assert again is not None and again.result == "released", again.reason


def test_the_claims_own_render_node_holder_is_drained(tmp_path: Path, node: AmdNode) -> None:
    """A process of the released claim's pod holding the partition's render node, which AMD SMI does not list
    (no KFD context), is signalled like a listed one; a holder of the sibling partition's node is not its."""
    rt, device, claim = _allocated_partition(tmp_path, node)
    own = Holder(node, node.dev("dri/renderD130"), pod=POD)  # type: ignore[arg-type]
    sibling = Holder(node, node.dev("dri/renderD129"), node.dev("dri/card1"), pod=OTHER)  # type: ignore[arg-type]
    try:
        record = rt.barrier.run(device, "deallocated", claim)
        assert not own.alive() and sibling.alive()
    finally:
        own.stop()
        sibling.stop()
    assert record.result == "released", record.reason
    assert record.pids_sigterm == [own.pid] and record.foreign_processes == []


def test_a_partition_the_kfd_maps_to_another_render_node_is_not_released(tmp_path: Path, node: AmdNode) -> None:
    """AMD SMI's renderD130 for gpu-2-130, but the KFD topology node AMD SMI names binds renderD129: the scan
    would look at the wrong node's holders, so it fails and the release is refused (fail closed)."""
    from dra_constructs.agent.barrier import HANDLE_SCAN_FAILED

    from .standin_amd import kfd_node

    node.residue_byte = 0x00
    node.fake_sysfs({0x0C00: 2})
    kfd_node(node.sysfs, 2, 129)  # the stand-in's amdsmi_get_gpu_kfd_info: node_id 2 for gpu-2-130
    rt = _amd_runtime(tmp_path, node)
    record = rt.barrier.run(rt.device("gpu-2-130"), "startup-unknown")
    assert record.result == "quarantined" and str(record.reason).startswith(HANDLE_SCAN_FAILED), record.reason
    assert "drm_render_minor 129, AMD SMI says renderD130" in str(record.reason)
