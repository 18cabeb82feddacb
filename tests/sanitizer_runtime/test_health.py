"""Health gates before a release and the attested driver state, on the simulated node (agent/health.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from dra_constructs.agent.backends.simulated import SimulatedCrash, SimulatedNode
from dra_constructs.agent.config import SimulatedBackendSettings
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.evidence import EvidenceRecord
from dra_constructs.agent.health import Reading, check
from dra_constructs.agent.kube import Tenant
from dra_constructs.agent.state import Phase

from .conftest import SimEnv

POD = "4b1d3c2e-9f8a-4e7d-b6c5-a4f3e2d1c0b9"
TENANT = Tenant("team-a/claim-1", "team-a", "uid-1", pods=(POD,))


def _claim(env: SimEnv, device: DeviceInfo | None = None) -> DeviceInfo:
    """A clean device, allocated to TENANT, with a tenant process on it."""
    device = device or env.device
    first = env.rt.barrier.run(device, "startup-unknown")
    assert first.result == "released", first.reason
    env.rt.barrier.mark_allocated(device, TENANT)
    env.node.start_tenant(device.name, [("obey", 1.0)], random.Random(0), pod=POD)
    return device


def _gates(record: EvidenceRecord) -> dict[str, str]:
    return {g.gate: g.status for g in record.health or []}


def test_healthy_release_records_every_gate_and_the_attestation(sim: SimEnv, tmp_path: Path) -> None:
    _claim(sim)
    record = sim.rt.barrier.run(sim.device, "deallocated", TENANT)
    assert record.result == "released", record.reason
    # a MIG slice: row remapping is not served with live instances (nvml.h), recorded, never passed
    assert _gates(record) == {"ecc-mode": "pass", "ecc-uncorrected": "pass", "row-remap": "unavailable",
                              "recovery-action": "pass", "xid": "pass"}
    assert any("row-remap unavailable" in w for w in record.warnings)
    att = record.attestation
    assert att is not None and att.driver_version == "570.124.06" and att.cuda_driver_version == 12080
    assert att.mig_mode is True and att.persistence_mode is True
    assert att.scrub_on_free_disabled is True  # the simulated node runs with scrub-on-free off
    assert att.conf_compute == {"environment": 0, "cc_feature": 0, "dev_tools_mode": 0}
    line = json.loads((tmp_path / "evidence.jsonl").read_text().splitlines()[-1])
    assert line["attestation"]["driver_version"] == "570.124.06" and len(line["health"]) == 5


def test_uncorrectable_ecc_error_during_the_claim_quarantines(sim: SimEnv) -> None:
    sim.node.health.gpu(sim.device.gpu_uuid).ecc_volatile_uncorrected = 3  # before the claim: the baseline
    _claim(sim)
    sim.node.health.gpu(sim.device.gpu_uuid).ecc_volatile_uncorrected = 4  # one during the claim
    record = sim.rt.barrier.run(sim.device, "deallocated", TENANT)
    assert record.result == "quarantined"
    assert record.reason is not None and record.reason.startswith("health gate ecc-uncorrected: 1 volatile")
    assert "(count 3 -> 4)" in record.reason
    assert _gates(record)["ecc-uncorrected"] == "fail" and record.attestation is not None
    metrics = sim.rt.metrics.render()
    assert b'dra_sanitizer_health_gates_total{gate="ecc-uncorrected",status="fail"} 1.0' in metrics
    assert sim.kube.tainted(sim.device.name)["spec"]["taint"]["value"] == "quarantined"
    assert record.bytes_verified > 0  # the memory was proven zero: the hardware is what failed


def test_errors_before_the_claim_do_not_count(sim: SimEnv) -> None:
    sim.node.health.gpu(sim.device.gpu_uuid).ecc_volatile_uncorrected = 7
    _claim(sim)
    assert sim.rt.barrier.run(sim.device, "deallocated", TENANT).result == "released"


def test_no_baseline_counts_from_the_barrier_start_and_says_so(sim: SimEnv) -> None:
    sim.node.health.gpu(sim.device.gpu_uuid).ecc_volatile_uncorrected = 2
    record = sim.rt.barrier.run(sim.device, "startup-unknown")
    assert record.result == "released", record.reason
    assert any("health baseline taken at the barrier's start" in w for w in record.warnings)


@pytest.mark.parametrize(("field", "value", "reason"), [
    ("recovery_action", 2, "recovery-action: the driver asks for NODE_REBOOT"),
    ("recovery_action", 4, "recovery-action: the driver asks for DRAIN_AND_RESET"),
    ("recovery_action", 3, "recovery-action: the driver asks for DRAIN_P2P"),
    ("ecc_enabled", False, "ecc-mode: ECC is disabled and require_ecc is set"),
    ("xids", [79], "xid: 1 critical XID event(s) during the claim"),
])
def test_each_gate_quarantines_with_its_reason(sim: SimEnv, field: str, value: object, reason: str) -> None:
    _claim(sim)
    setattr(sim.node.health.gpu(sim.device.gpu_uuid), field, value)
    record = sim.rt.barrier.run(sim.device, "deallocated", TENANT)
    assert record.result == "quarantined" and record.reason is not None
    assert reason in record.reason, record.reason
    assert sim.rt.barrier.deps.store.load(sim.device.name).phase is Phase.QUARANTINED


def test_pending_remap_on_a_whole_gpu_quarantines(tmp_path: Path) -> None:
    env = SimEnv(tmp_path, simulated=SimulatedBackendSettings(gpus=1, mig_slices_per_gpu=0, memory_bytes=2048))
    _claim(env)
    env.node.health.gpu(env.device.gpu_uuid).remap_pending = True
    record = env.rt.barrier.run(env.device, "deallocated", TENANT)
    assert record.result == "quarantined" and record.reason is not None
    assert "row-remap: row remapping pending" in record.reason
    assert record.attestation is not None and record.attestation.mig_mode is False


def test_pre_ampere_checks_retired_pages_instead(tmp_path: Path) -> None:
    env = SimEnv(tmp_path, simulated=SimulatedBackendSettings(gpus=1, mig_slices_per_gpu=0, memory_bytes=2048))
    gpu = env.node.health.gpu(env.device.gpu_uuid)
    gpu.ampere_or_newer = False
    _claim(env)
    gpu.retired_pages_pending = True
    record = env.rt.barrier.run(env.device, "deallocated", TENANT)
    assert record.result == "quarantined" and "retired-pages: page retirement pending" in (record.reason or "")
    assert _gates(record)["row-remap"] == "unavailable"


def test_ecc_disabled_is_recorded_when_not_required(tmp_path: Path) -> None:
    env = SimEnv(tmp_path, require_ecc=False)
    env.node.health.gpu(env.device.gpu_uuid).ecc_enabled = False
    record = env.rt.barrier.run(env.device, "startup-unknown")
    assert record.result == "released", record.reason
    assert _gates(record)["ecc-mode"] == "unavailable" and _gates(record)["ecc-uncorrected"] == "unavailable"


def test_a_read_that_errors_fails_closed(sim: SimEnv) -> None:
    sim.node.health.gpu(sim.device.gpu_uuid).errors["recovery_action"] = "Unknown Error"
    record = sim.rt.barrier.run(sim.device, "startup-unknown")
    assert record.result == "quarantined"
    assert "recovery-action: the read failed: Unknown Error" in (record.reason or "")


def test_unsupported_is_recorded_not_passed(sim: SimEnv) -> None:
    sim.node.health.cuda_driver_version = 12040  # R550: no recovery-action field yet
    record = sim.rt.barrier.run(sim.device, "startup-unknown")
    assert record.result == "released"
    assert _gates(record)["recovery-action"] == "unavailable"
    assert any("recovery-action unavailable" in w for w in record.warnings)


def test_attestation_in_quarantined_records_too(sim: SimEnv) -> None:
    sim.faults.rates["cuda.open"] = 1.0
    record = sim.rt.barrier.run(sim.device, "startup-unknown")
    assert record.result == "quarantined" and record.health is None  # failed before the gates
    assert record.attestation is not None and record.attestation.driver_version == "570.124.06"


def test_operator_release_note_carries_the_attestation(sim: SimEnv, tmp_path: Path) -> None:
    sim.node.health.gpu(sim.device.gpu_uuid).recovery_action = 1
    assert sim.rt.barrier.run(sim.device, "startup-unknown").result == "quarantined"
    sim.node.health.gpu(sim.device.gpu_uuid).recovery_action = 0  # the operator reset the GPU
    assert sim.rt.barrier.operator_release(sim.device, "GPU reset", "ops").result == "released"
    lines = [json.loads(x) for x in (tmp_path / "evidence.jsonl").read_text().splitlines()]
    assert [x["kind"] for x in lines] == ["barrier", "operator-release", "barrier"]
    assert all(x["attestation"]["driver_version"] == "570.124.06" for x in lines)


def test_gates_off_runs_none(tmp_path: Path) -> None:
    env = SimEnv(tmp_path, health_gates=False)
    env.node.health.gpu(env.device.gpu_uuid).recovery_action = 1
    record = env.rt.barrier.run(env.device, "startup-unknown")
    assert record.result == "released" and record.health is None and record.attestation is not None


def test_a_release_sets_the_next_claims_baseline(sim: SimEnv) -> None:
    _claim(sim)
    sim.node.health.gpu(sim.device.gpu_uuid).xids.append(13)
    assert sim.rt.barrier.run(sim.device, "deallocated", TENANT).result == "quarantined"
    # the operator reset the GPU (counts cleared): the release passes and the counters become the baseline
    sim.node.health.gpu(sim.device.gpu_uuid).xids.clear()
    assert sim.rt.barrier.operator_release(sim.device, "GPU reset", "ops").result == "released"
    assert sim.rt.barrier.deps.store.load(sim.device.name).health_baseline == {
        "ecc_volatile_uncorrected": 0, "xid_count": 0}


def test_mig_slice_reads_its_parent_gpu() -> None:
    node = SimulatedNode(SimulatedBackendSettings(gpus=1, mig_slices_per_gpu=2, memory_bytes=2048))
    first, second = node.device_infos[:2]
    node.health.gpu(first.gpu_uuid).ecc_volatile_uncorrected = 1
    reads = node.health.read(second, ("ecc_volatile_uncorrected",))
    assert reads == {"ecc_volatile_uncorrected": Reading(1)}
    report = check(node.health, second, {"ecc_volatile_uncorrected": 0}, require_ecc=True)
    assert report.failures and report.failures[0].startswith("ecc-uncorrected")


class _Reads:
    """A HealthSource answering fixed readings (the NVML answers of one GPU)."""

    def __init__(self, **reads: Reading) -> None:
        self.reads = reads

    def read(self, device: DeviceInfo, names: tuple[str, ...]) -> dict[str, Reading]:
        return {name: self.reads.get(name, Reading(0)) for name in names}


def test_whole_gpu_in_mig_mode_gets_no_page_retirement_fallback() -> None:
    """A DynamicMIG whole GPU (not a MIG handle) with MIG on: remap not served is MIG's, not pre-Ampere."""
    source = _Reads(ecc_mode=Reading(1), remapped_rows=Reading(error="Not Supported", unsupported=True),
                    retired_pages_pending=Reading(1), mig_mode=Reading(1))
    whole = DeviceInfo("gpu-0", "GPU-w", 0, 1 << 30, whole_gpu=True, dynamic=True)
    report = check(source, whole, None, require_ecc=True)
    statuses = {g.gate: g.status for g in report.gates}
    assert statuses["row-remap"] == "unavailable" and "retired-pages" not in statuses and not report.failures
    source.reads["mig_mode"] = Reading(0)  # MIG off: NOT_SUPPORTED means pre-Ampere, page retirement is read
    report = check(source, whole, None, require_ecc=True)
    assert report.failures == ["retired-pages: page retirement pending (a reboot or GPU reset applies it)"]


def test_randomized_faults_never_release_a_faulty_gpu(tmp_path: Path) -> None:
    """Rounds of claims on 2 GPUs x 3 slices with faults injected during the claims: a device is released
    exactly when its GPU had no new ECC error or XID since the claim's allocation and asks for no recovery
    action; after a GPU reset (counters cleared) an operator release of each quarantined slice passes."""
    env = SimEnv(tmp_path, simulated=SimulatedBackendSettings(gpus=2, mig_slices_per_gpu=3, memory_bytes=2048))
    rng = random.Random(23)
    devices = env.rt.devices
    for device in devices:
        assert env.rt.barrier.run(device, "startup-unknown").result == "released"
    gpus = sorted({d.gpu_uuid for d in devices})
    quarantined = released = 0
    for round_ in range(25):
        tenants = {}
        for device in devices:
            pod = f"00000000-0000-4000-8000-{round_:06d}{device.minor:02d}{devices.index(device):04d}"
            tenants[device.name] = Tenant(f"team-a/c-{round_}-{device.name}", "team-a", f"u-{round_}-{device.name}",
                                          pods=(pod,))
            env.rt.barrier.mark_allocated(device, tenants[device.name])
            env.node.start_tenant(device.name, [("obey", 1.0)], rng, pod=pod)

        def counts(uuid: str) -> tuple[int, int]:
            gpu = env.node.health.gpu(uuid)
            return gpu.ecc_volatile_uncorrected, len(gpu.xids)

        at_allocation = {d.name: counts(d.gpu_uuid) for d in devices}
        for _ in range(rng.randint(0, 2)):
            gpu = env.node.health.gpu(rng.choice(gpus))
            if rng.random() < 0.5:
                gpu.ecc_volatile_uncorrected += 1
            else:
                gpu.xids.append(rng.choice([48, 63, 79, 94]))
        if rng.random() < 0.15:
            env.node.health.gpu(rng.choice(gpus)).recovery_action = rng.choice([1, 2, 3, 4])
        for device in rng.sample(devices, len(devices)):
            record = env.rt.barrier.run(device, "deallocated", tenants[device.name])
            gpu = env.node.health.gpu(device.gpu_uuid)
            faulty = counts(device.gpu_uuid) != at_allocation[device.name] or gpu.recovery_action != 0
            assert (record.result == "quarantined") is faulty, (round_, device.name, record.reason)
            if faulty:
                assert (record.reason or "").startswith("health gate ")
                quarantined += 1
            else:
                released += 1
        for uuid in gpus:  # the operator resets a GPU with quarantined slices, then releases them
            slices = [d for d in devices if d.gpu_uuid == uuid
                      and env.rt.barrier.deps.store.load(d.name).phase is Phase.QUARANTINED]
            if not slices:
                continue
            gpu = env.node.health.gpu(uuid)
            gpu.ecc_volatile_uncorrected, gpu.xids, gpu.recovery_action = 0, [], 0
            for device in slices:
                assert env.rt.barrier.operator_release(device, "GPU reset", "ops").result == "released"
    assert quarantined > 10 and released > 50  # both sides of the oracle were exercised


# --- a cold reset zeroes the volatile ECC counters (review finding 7) ------------------------------

def _reset_env(tmp_path: Path) -> SimEnv:
    return SimEnv(tmp_path, partition_reset="gpu",
                  simulated=SimulatedBackendSettings(gpus=1, mig_slices_per_gpu=0, memory_bytes=2048))


def test_errors_before_a_cold_reset_still_quarantine(tmp_path: Path) -> None:
    env = _reset_env(tmp_path)
    gpu = env.node.health.gpu(env.device.gpu_uuid)
    gpu.ecc_volatile_uncorrected = 5  # before the claim: the allocation's baseline
    _claim(env)
    gpu.ecc_volatile_uncorrected = 7  # two during the claim; the release's GPU reset zeroes the count
    record = env.rt.barrier.run(env.device, "deallocated", TENANT)
    assert record.reset_type == "gpu" and gpu.ecc_volatile_uncorrected == 0
    assert record.result == "quarantined", "a reset must not hide the claim's errors"
    assert "ecc-uncorrected: 2 volatile uncorrectable ECC error(s)" in (record.reason or "")
    assert "2 before the cold reset; count 0 -> 0 after it" in (record.reason or "")


def test_a_cold_reset_is_no_false_quarantine_and_rebases_the_next_claim(tmp_path: Path) -> None:
    env = _reset_env(tmp_path)
    gpu = env.node.health.gpu(env.device.gpu_uuid)
    gpu.ecc_volatile_uncorrected = 5  # old errors, none during the claim
    _claim(env)
    record = env.rt.barrier.run(env.device, "deallocated", TENANT)
    assert record.result == "released", record.reason
    assert _gates(record)["ecc-uncorrected"] == "pass"
    state = env.rt.barrier.deps.store.load(env.device.name)
    assert state.health_baseline == {"ecc_volatile_uncorrected": 0, "xid_count": 0}  # read after the reset
    env.rt.barrier.mark_allocated(env.device, TENANT)
    gpu.ecc_volatile_uncorrected = 1  # one in the next claim: counted from the post-reset baseline
    record = env.rt.barrier.run(env.device, "deallocated", TENANT)
    assert record.result == "quarantined" and "1 volatile uncorrectable" in (record.reason or "")


def test_errors_before_a_cold_reset_survive_a_restart_after_it(tmp_path: Path) -> None:
    """The agent dies after the reset (baseline re-read, carried counts only in the reset record): the
    recovery's barrier must still count what the claim gained before the reset."""
    armed = {"on": False}

    def hook(_device: str, where: str) -> None:
        if armed["on"] and where == "fill":
            armed["on"] = False
            raise SimulatedCrash(where)

    env = SimEnv(tmp_path, partition_reset="gpu", crash_hook=hook,
                 simulated=SimulatedBackendSettings(gpus=1, mig_slices_per_gpu=0, memory_bytes=2048))
    gpu = env.node.health.gpu(env.device.gpu_uuid)
    gpu.ecc_volatile_uncorrected = 5
    _claim(env)
    gpu.ecc_volatile_uncorrected = 7  # two during the claim
    armed["on"] = True
    with pytest.raises(SimulatedCrash):
        env.rt.barrier.run(env.device, "deallocated", TENANT)
    assert gpu.ecc_volatile_uncorrected == 0  # the reset happened before the crash
    env.restart()
    (device,) = env.rt.devices
    record = env.rt.barrier.recover(device)
    assert record is not None and record.result == "quarantined", "a restart must not hide the claim's errors"
    assert "ecc-uncorrected: 2 volatile uncorrectable ECC error(s)" in (record.reason or "")
    # The operator looked (the quarantine named the errors) and releases it: counted from the reset on.
    assert env.rt.barrier.operator_release(device, "GPU checked", "ops").result == "released"


def test_a_count_unread_before_a_reset_fails_closed() -> None:
    node = SimulatedNode(SimulatedBackendSettings(gpus=1, mig_slices_per_gpu=0, memory_bytes=2048))
    (device,) = node.nvml.enumerate().devices
    report = check(node.health, device, {"ecc_volatile_uncorrected": 0, "xid_count": 0}, True,
                   carried=None, reset=True)
    assert any(f.startswith("ecc-uncorrected: the count before this release's cold reset") for f in report.failures)
    report = check(node.health, device, {"ecc_volatile_uncorrected": 0, "xid_count": 0}, True,
                   carried={"ecc_volatile_uncorrected": 0, "xid_count": 0}, reset=True)
    assert report.failures == []
