"""Randomized fault schedules: >= 1,000 of them, zero dirty releases, every failure with a reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dra_constructs.agent.backends import simulated
from dra_constructs.agent.backends.base import VerifyResult
from dra_constructs.agent.simscenarios import TURNOVER_FAILURES
from dra_constructs.agent.simulate import simulate


@pytest.mark.slow
def test_a_thousand_randomized_schedules_have_no_dirty_release(tmp_path: Path) -> None:
    runs = [  # (devices, cycles, fault rate, seed, target, reset): >= 1,000 schedules, crashes included
        (56, 8, 0.05, 11, "1.34", "off"),
        (56, 8, 0.15, 12, "1.37", "off"),
        (56, 8, 0.10, 13, "1.32", "off"),
        (56, 6, 0.05, 14, "1.34", "mig-instance"),
    ]
    total = recovery_releases = resets = 0
    for devices, cycles, rate, seed, version, reset in runs:
        records = tmp_path / f"records-{seed}.jsonl"
        summary = simulate(devices=devices, cycles=cycles, fault_rate=rate, seed=seed, records=str(records),
                           kubernetes_version=version, partition_reset=reset)
        total += summary.schedules
        recovery_releases += summary.recovery_releases
        resets += summary.resets
        assert summary.dirty_releases == 0, summary.dirty_release_details
        assert summary.failures_without_reason == 0 and summary.stuck_tenants_released == 0
        assert summary.released_without_proof == 0
        # The agent's turnover scenarios at this target: nobody else's process signalled, no silent adoption.
        assert summary.turnovers["rounds"] == 4 * cycles
        assert {k: summary.turnovers[k] for k in TURNOVER_FAILURES} == dict.fromkeys(TURNOVER_FAILURES, 0)
        assert summary.releases_observed >= summary.released > 0 and summary.quarantined > 0
        assert summary.crashes > 0 and len(summary.faults_injected) >= 10
        lines = [json.loads(x) for x in records.read_text().splitlines()]
        quarantined = [r for r in lines if r["result"] == "quarantined"]
        assert quarantined and all(r["reason"] for r in quarantined)
        released = [r for r in lines if r["result"] == "released"]
        # Every released record carries its proof, releases finished after a crash included (item 9).
        assert all(r["nonzero_words"] == 0 and r["coverage_of_free"] >= 0.99 and r["bytes_verified"] > 0
                   for r in released)
        if reset != "off":
            assert any(r["reset_type"] == reset and r["reset_old_uuid"] != r["reset_new_uuid"] for r in released)
    assert total >= 1000 and recovery_releases > 0 and resets > 0


@pytest.mark.slow
def test_dynamic_mig_schedules_have_no_dirty_release(tmp_path: Path) -> None:
    """DynamicMIG: random placements, instances gone (or not) before the barrier, crashes, faults."""
    records = tmp_path / "records.jsonl"
    summary = simulate(devices=60, cycles=30, fault_rate=0.05, seed=21, records=str(records), dynamic_mig=True,
                       turnover_rounds=0)  # (the turnover scenarios run on whole GPUs: the test above)
    assert summary.schedules >= 80 and summary.crashes > 0
    assert summary.dirty_releases == 0, summary.dirty_release_details
    assert summary.released_without_proof == 0 and summary.failures_without_reason == 0
    lines = [json.loads(x) for x in records.read_text().splitlines()]
    transient = [r for r in lines if r["result"] == "released" and r["transient_instance"]]
    in_place = [r for r in lines if r["result"] == "released" and r["trigger"] == "deallocated"
                and not r["transient_instance"]]
    assert transient and in_place  # both paths ran: the slice gone, and still prepared
    assert all(r["guarded_overlaps"] for r in transient)


def test_the_audit_catches_a_barrier_that_lies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: a verify that always says "all zero" lets silent memset faults through."""
    real_verify = simulated._SimSession.verify

    def lying_verify(self: simulated._SimSession) -> VerifyResult:
        result = real_verify(self)
        return VerifyResult(result.bytes_verified, 0, result.seconds)

    monkeypatch.setattr(simulated._SimSession, "verify", lying_verify)
    # Three seeds: whether one seed's silent memset faults land on a device that is then released
    # is luck of the fault stream (every extra API call, such as a lifecycle Event, redraws it).
    summaries = [simulate(devices=14, cycles=4, fault_rate=0.3, seed=seed, crash_rate=0.0, turnover_rounds=0)
                 for seed in (5, 6, 7)]
    assert all(s.faults_injected.get("cuda.memset_silent", 0) > 0 for s in summaries)
    dirty = [d for s in summaries for d in s.dirty_release_details]
    assert dirty and any(d["nonzero_bytes"] > 0 for d in dirty)


def test_the_audit_catches_live_contexts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: NVML hiding the tenant (no hostPID) and no compute-mode guard."""
    monkeypatch.setattr(simulated._SimNvml, "processes", lambda self, device: [])
    summary = simulate(devices=7, cycles=2, fault_rate=0.0, seed=3, turnover_rounds=0)
    # The hidden tenant's memory is in use with no listed process: quarantined before the fill.
    assert summary.dirty_releases == 0 and summary.quarantine_reasons.get("unaccounted memory", 0) > 0
    honest = simulated._SimNvml.memory
    monkeypatch.setattr(simulated._SimNvml, "memory", lambda self, device: simulated.MemoryInfo(
        honest(self, device).total, 0, honest(self, device).total, 0))  # NVML hides the memory too
    summary = simulate(devices=7, cycles=2, fault_rate=0.0, seed=3, turnover_rounds=0)
    # EXCLUSIVE_PROCESS alone still refuses our context next to the hidden tenant: quarantine.
    assert summary.dirty_releases == 0 and summary.quarantine_reasons.get("cuCtxCreate", 0) > 0
    monkeypatch.setattr(simulated._SimNvml, "set_compute_mode", lambda self, device, mode: None)
    summary = simulate(devices=7, cycles=2, fault_rate=0.0, seed=3, turnover_rounds=0)
    assert summary.dirty_releases > 0
    assert any(d["live_contexts"] > 0 for d in summary.dirty_release_details)
