"""Health gates and attestation through real pynvml against the stand-in NVML (nvml.c "health").

The barrier runs as on a node (``build_runtime(backend="nvml")``): NvmlHealth reads ECC, row
remapping, page retirement, the recovery-action field, XID events and the driver state; the test
changes the GPU's health while a claim holds it (``Node.set_health``, ``Node.xid``).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.kube import Tenant as ClaimTenant
from dra_constructs.agent.runtime import Runtime

from .standin import CI, GI, GPU, MiB, Node
from .test_standin_backends import POD, MakeNode, a100_mig, runtime, standin  # noqa: F401 - fixture

CLAIM = ClaimTenant("team-a/c1", "team-a", "u1", pods=(POD,))


def _gates(record: object) -> dict[str, str]:
    return {g.gate: g.status for g in getattr(record, "health", None) or []}


def _allocated(standin: MakeNode, tmp_path: Path, gpu: GPU | None = None,  # noqa: F811
               **fields: object) -> tuple[Node, Runtime, DeviceInfo]:
    node = standin([gpu or GPU("GPU-a", total=64 * MiB)], **fields)
    rt = runtime(tmp_path)
    device = rt.devices[0]
    first = rt.barrier.run(device, "startup-unknown")
    assert first.result == "released", first.reason
    rt.barrier.mark_allocated(device, CLAIM)
    return node, rt, device


def test_healthy_gpu_passes_every_gate_with_the_attestation(standin: MakeNode, tmp_path: Path) -> None:  # noqa: F811
    _node, rt, device = _allocated(standin, tmp_path)
    record = rt.barrier.run(device, "deallocated", CLAIM)
    assert record.result == "released", record.reason
    assert _gates(record) == {"ecc-mode": "pass", "ecc-uncorrected": "pass", "row-remap": "pass",
                              "recovery-action": "pass", "xid": "pass"}
    att = record.attestation
    assert att is not None and att.driver_version == "570.124.06" and att.cuda_driver_version == 12080
    assert att.persistence_mode is True and att.mig_mode is False and att.errors == {}
    assert att.conf_compute == {"environment": 0, "cc_feature": 0, "dev_tools_mode": 0}


@pytest.mark.parametrize(("health", "reason"), [
    ({"ecc_volatile_uncorrected": 2}, "ecc-uncorrected: 2 volatile uncorrectable ECC error(s)"),
    ({"remap_pending": 1}, "row-remap: row remapping pending"),
    ({"remap_failure": 1}, "row-remap: a row remapping failed"),
    ({"recovery_action": 1}, "recovery-action: the driver asks for GPU_RESET"),
    ({"recovery_action": 4}, "recovery-action: the driver asks for DRAIN_AND_RESET"),
    ({"ecc_enabled": 0}, "ecc-mode: ECC is disabled and require_ecc is set"),
])
def test_each_injected_fault_quarantines_with_its_reason(standin: MakeNode, tmp_path: Path,  # noqa: F811
                                                         health: dict[str, int], reason: str) -> None:
    node, rt, device = _allocated(standin, tmp_path)
    node.set_health(0, **health)  # during the claim
    record = rt.barrier.run(device, "deallocated", CLAIM)
    assert record.result == "quarantined" and reason in (record.reason or ""), record.reason
    assert record.attestation is not None and record.attestation.driver_version == "570.124.06"


def test_xid_during_the_claim_quarantines(standin: MakeNode, tmp_path: Path) -> None:  # noqa: F811
    node, rt, device = _allocated(standin, tmp_path)
    node.xid(0, 79)  # "GPU has fallen off the bus"
    record = rt.barrier.run(device, "deallocated", CLAIM)
    assert record.result == "quarantined"
    assert "xid: 1 critical XID event(s) during the claim" in (record.reason or "")


def test_errors_before_the_claim_are_its_baseline(standin: MakeNode, tmp_path: Path) -> None:  # noqa: F811
    node = standin([GPU("GPU-a", total=64 * MiB)])
    node.set_health(0, ecc_volatile_uncorrected=5)
    rt = runtime(tmp_path)
    device = rt.devices[0]
    rt.barrier.mark_allocated(device, CLAIM)
    assert rt.barrier.run(device, "deallocated", CLAIM).result == "released"


@pytest.mark.parametrize("generation", ["535", "550"])
def test_recovery_action_not_served_before_r570_is_recorded(standin: MakeNode, tmp_path: Path,  # noqa: F811
                                                            generation: str) -> None:
    _node, rt, device = _allocated(standin, tmp_path, generation=generation)
    record = rt.barrier.run(device, "deallocated", CLAIM)
    assert record.result == "released", record.reason
    gate = next(g for g in record.health or [] if g.gate == "recovery-action")
    assert gate.status == "unavailable" and "Not Supported" in gate.detail


@pytest.mark.parametrize(("generation", "result"), [("535", "released"), ("570", "quarantined")])
def test_recovery_field_invalid_argument(standin: MakeNode, tmp_path: Path,  # noqa: F811
                                         generation: str, result: str) -> None:
    """INVALID_ARGUMENT for the field: an id the pre-R570 NVML does not know (unavailable); on R570+ an error."""
    node, rt, device = _allocated(standin, tmp_path, generation=generation)
    node.set_health(0, recovery_field_status=2)
    record = rt.barrier.run(device, "deallocated", CLAIM)
    assert record.result == result, record.reason
    gate = next(g for g in record.health or [] if g.gate == "recovery-action")
    assert gate.status == ("unavailable" if result == "released" else "fail") and "Invalid Argument" in gate.detail


def test_mig_gpu_with_live_instances_records_remap_unavailable(standin: MakeNode, tmp_path: Path) -> None:  # noqa: F811
    gpu = a100_mig("GPU-m", 0, [GI(1, [CI("MIG-m1")], placement_start=0)])
    node, rt, device = _allocated(standin, tmp_path, gpu)
    node.set_health(0, remap_pending=1)  # not visible through nvmlDeviceGetRemappedRows while MIG instances live
    record = rt.barrier.run(device, "deallocated", CLAIM)
    assert _gates(record)["row-remap"] == "unavailable" and record.result == "released", record.reason
    node.set_health(0, recovery_action=4)  # what the driver asks for a pending remap on R570+
    rt.barrier.mark_allocated(device, CLAIM)
    record = rt.barrier.run(device, "deallocated", CLAIM)
    assert record.result == "quarantined" and "DRAIN_AND_RESET" in (record.reason or "")
    assert record.attestation is not None and record.attestation.mig_mode is True


def test_pre_ampere_reads_retired_pages(standin: MakeNode, tmp_path: Path) -> None:  # noqa: F811
    gpu = GPU("GPU-v", total=64 * MiB, name="Tesla V100-SXM2-32GB", arch=70)
    node, rt, device = _allocated(standin, tmp_path, gpu, ptx_isa_max=87)
    node.set_health(0, retired_pending=1)
    record = rt.barrier.run(device, "deallocated", CLAIM)
    assert _gates(record)["row-remap"] == "unavailable"
    assert record.result == "quarantined" and "retired-pages: page retirement pending" in (record.reason or "")
    assert "conf_compute" in (record.attestation.errors if record.attestation else {})  # pre-Ampere: no CC


def test_an_erroring_read_fails_closed(standin: MakeNode, tmp_path: Path) -> None:  # noqa: F811
    standin([GPU("GPU-a", total=64 * MiB, error=999, error_call="nvmlDeviceGetTotalEccErrors")])
    rt = runtime(tmp_path)
    record = rt.barrier.run(rt.devices[0], "startup-unknown")
    assert record.result == "quarantined"
    assert "ecc-uncorrected: the read failed" in (record.reason or "") and "Unknown Error" in (record.reason or "")


def test_gate_latency_per_device(standin: MakeNode, tmp_path: Path) -> None:  # noqa: F811
    """The measurement docs/sanitizer-runtime.md quotes: one gate check + attestation per device."""
    from dra_constructs.agent.health import attest, check

    standin([GPU("GPU-a", total=64 * MiB)])
    rt = runtime(tmp_path)
    source, device = rt.barrier.deps.health, rt.devices[0]
    assert source is not None
    runs = 200
    start = time.perf_counter()
    for _ in range(runs):
        assert not check(source, device, None, require_ecc=True).failures
        attest(source, device, None)
    per_device = (time.perf_counter() - start) / runs
    print(f"gate check + attestation: {per_device * 1e3:.3f} ms per device")
    assert per_device < 0.05
