"""The residue canary (agent/canary.py) on the simulated node: both driver behaviours, the regime
switch, the Event, the selftest record, never a claimed device, once per (model, driver), the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dra_constructs.agent import canary
from dra_constructs.agent.agent import Agent
from dra_constructs.agent.cli import main
from dra_constructs.agent.config import SimulatedBackendSettings
from dra_constructs.agent.kube import Tenant
from dra_constructs.agent.state import Phase
from dra_constructs.errors import DraConstructsError

from .conftest import SimEnv

TENANT = Tenant("team-a/claim-1", "team-a", "uid-1")


def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scrub_on_free: bool, params_say_on: bool = True) -> SimEnv:
    env = SimEnv(tmp_path, selftest_at_start=True, simulated=SimulatedBackendSettings(
        gpus=1, mig_slices_per_gpu=2, memory_bytes=2048, scrub_on_free=scrub_on_free))
    if params_say_on:  # /proc/driver/nvidia/params without RMDisableScrubOnFree (a vGPU or NUMA-onlined host)
        monkeypatch.setattr(env.node.nvml, "scrub_on_free_disabled", lambda: False)
        env.restart()
    for device in env.rt.devices:
        assert env.rt.barrier.run(device, "test").result == "released"
    return env


def _records(tmp_path: Path, kind: str = "selftest") -> list[dict[str, Any]]:
    lines = (tmp_path / "evidence.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def test_residue_switches_the_regime_posts_an_event_and_records(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    env = _env(tmp_path, monkeypatch, scrub_on_free=False)
    deps = env.rt.barrier.deps
    assert deps.scrub_on_free_disabled is False  # the params file says scrub-on-free is on
    device = env.device
    record = canary.run_selftest(deps, device, "selftest")
    assert record.result == "residue" and record.selftest is not None
    figures = record.selftest
    assert figures.residue_words == figures.bytes_read // 8 > 0 and figures.bytes_written >= figures.bytes_read
    assert (figures.model, figures.driver_version) == ("Simulated GPU", "570.124.06")
    assert deps.scrub_on_free_disabled is True  # the node's regime: the fill is the only scrub
    assert b"dra_sanitizer_scrub_on_free_disabled 1.0" in env.rt.metrics.render()
    assert b'dra_sanitizer_selftest_residue{driver="570.124.06",model="Simulated GPU"} 1.0' in env.rt.metrics.render()
    events = [e for e in env.kube.events if e["reason"] == "ResidueCanaryFailed"]
    assert len(events) == 1 and events[0]["type"] == "Warning" and device.name in events[0]["message"]
    assert [r["result"] for r in _records(tmp_path)] == ["residue"]
    # the device is left as clean as it came: state clean, untainted, no residue a tenant could read
    assert deps.store.load(device.name).phase is Phase.CLEAN and env.kube.tainted(device.name) is None
    assert env.node.audit(device.name).clean
    # every later barrier record says so
    assert env.rt.barrier.run(device, "test").scrub_on_free_disabled is True
    # and a restart keeps the regime (the verdict is stored per model and driver)
    assert env.restart().barrier.deps.scrub_on_free_disabled is True


def test_clean_records_without_a_switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _env(tmp_path, monkeypatch, scrub_on_free=True)
    deps = env.rt.barrier.deps
    record = canary.run_selftest(deps, env.device, "selftest")
    assert record.result == "clean" and record.selftest is not None and record.selftest.residue_words == 0
    assert record.selftest.bytes_read > 0 and record.reason is None
    assert deps.scrub_on_free_disabled is False
    assert not [e for e in env.kube.events if e["reason"].startswith("ResidueCanary")]
    assert [r["result"] for r in _records(tmp_path)] == ["clean"]
    assert deps.store.load(env.device.name).phase is Phase.CLEAN


def test_claimed_device_is_never_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _env(tmp_path, monkeypatch, scrub_on_free=False)
    barrier = env.rt.barrier
    held, free = env.rt.devices
    barrier.mark_allocated(held, TENANT)
    with pytest.raises(DraConstructsError, match=r"not clean and unclaimed \(phase allocated"):
        canary.run_selftest(barrier.deps, held, "selftest")
    with pytest.raises(DraConstructsError, match="claimed"):  # a claim the agent knows of, state not yet
        canary.run_selftest(barrier.deps, free, "selftest", claimed=lambda name: name == free.name)
    assert _records(tmp_path) == [] and barrier.deps.store.load(held.name).phase is Phase.ALLOCATED
    # at start: every device claimed -> skipped with the reason, nothing run
    assert canary.at_start(barrier, env.rt.devices, claimed=lambda _name: True) == []
    # one free: the canary runs there and only there
    records = canary.at_start(barrier, env.rt.devices, claimed=lambda _name: False)
    assert [r.device for r in records] == [free.name] and barrier.deps.store.load(held.name).phase is Phase.ALLOCATED


def test_agent_start_runs_once_per_model_and_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _env(tmp_path, monkeypatch, scrub_on_free=True)
    Agent(env.rt).startup()
    assert [r["trigger"] for r in _records(tmp_path)] == ["agent-start"]  # one GPU model: one device
    Agent(env.restart()).startup()
    assert len(_records(tmp_path)) == 1  # the stored verdict holds for this model and driver
    env.node.health.driver_version = "580.65.06"  # a driver upgrade: run again
    Agent(env.restart()).startup()
    assert [r["selftest"]["driver_version"] for r in _records(tmp_path)] == ["570.124.06", "580.65.06"]


def test_backend_error_is_inconclusive_and_fails_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _env(tmp_path, monkeypatch, scrub_on_free=True)
    deps = env.rt.barrier.deps
    env.faults.rates["cuda.open"] = 1.0
    record = canary.run_selftest(deps, env.device, "selftest")
    assert record.result == "inconclusive" and "CUDA_ERROR_NOT_INITIALIZED" in (record.reason or "")
    assert deps.scrub_on_free_disabled is True  # the agent does not know: it assumes no scrub
    assert [e["reason"] for e in env.kube.events if e["reason"].startswith("ResidueCanary")] == [
        "ResidueCanaryInconclusive"]
    assert deps.store.load(env.device.name).phase is Phase.GUARD  # not proven clean: a barrier follows
    env.faults.rates["cuda.open"] = 0.0
    canary.finish(env.rt.barrier, env.device)
    assert deps.store.load(env.device.name).phase is Phase.CLEAN
    assert not (tmp_path / "state" / canary.CANARY_FILE).exists()  # inconclusive is not stored: runs again


def _config(tmp_path: Path, scrub_on_free: bool) -> str:
    path = tmp_path / "agent.yaml"
    path.write_text(f"node_name: node-a\nbackend: simulated\nstate_dir: {tmp_path}/state\n"
                    f"evidence_file: {tmp_path}/evidence.jsonl\n"
                    f"simulated: {{gpus: 1, mig_slices_per_gpu: 2, scrub_on_free: {str(scrub_on_free).lower()}}}\n"
                    "kube: {mode: disabled, kubernetes_version: '1.34'}\n")
    return str(path)


@pytest.mark.parametrize(("scrub_on_free", "code", "verdict"), [(True, 0, "clean"), (False, 1, "residue")])
def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str], scrub_on_free: bool, code: int,
                        verdict: str) -> None:
    config = _config(tmp_path, scrub_on_free)
    device = "gpu-0-mig-1g10gb-19-0"
    assert main(["selftest", "--config", config, "--device", device]) == 2  # never sanitized: not clean
    assert "not clean and unclaimed" in capsys.readouterr().err
    assert main(["once", "--config", config, "--device", device]) == 0
    capsys.readouterr()
    assert main(["selftest", "--config", config, "--device", device]) == code
    assert json.loads(capsys.readouterr().out)["result"] == verdict
    assert main(["selftest", "--config", config]) == code  # the one clean device, chosen per model and driver
    assert json.loads(capsys.readouterr().out)["device"] == device
    assert main(["selftest", "--config", config, "--device", "gpu-9"]) == 2
    assert [r["result"] for r in _records(tmp_path)] == [verdict, verdict]
    capsys.readouterr()
    assert main(["evidence", "--config", config, "--html", str(tmp_path / "r.html")]) == 0  # readable beside cycles
    assert capsys.readouterr().out.count(f" {verdict} ") == 2 and "selftest" in (tmp_path / "r.html").read_text()


def test_a_cleanup_short_of_the_barriers_coverage_is_inconclusive(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Review finding 4: the cleanup passes the barrier's own check (every zeroed byte read back)."""
    from dra_constructs.agent.backends import simulated
    from dra_constructs.agent.backends.base import VerifyResult

    env = _env(tmp_path, monkeypatch, scrub_on_free=True)
    real = simulated._SimSession.verify

    def short(self: Any) -> VerifyResult:  # a verify kernel that read one granule less than was zeroed
        result = real(self)
        return VerifyResult(bytes_verified=result.bytes_verified - 256, nonzero_words=0, seconds=result.seconds)

    monkeypatch.setattr(simulated._SimSession, "verify", short)
    record = canary.run_selftest(env.rt.barrier.deps, env.device, "selftest")
    assert record.result == "inconclusive" and "the cleanup did not verify: the verify kernel read" in (
        record.reason or "")
    assert record.bytes_verified > 0 and record.coverage_of_free is not None  # the figures a barrier records
    assert env.rt.barrier.deps.store.load(env.device.name).phase is Phase.GUARD  # the whole barrier follows
    monkeypatch.setattr(simulated._SimSession, "verify", real)
    canary.finish(env.rt.barrier, env.device)
    assert env.rt.barrier.deps.store.load(env.device.name).phase is Phase.CLEAN


def test_on_demand_runs_on_a_device_a_tenant_used_once_sanitized(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Review finding 6: after a successful barrier, under the device's lock and taint, on demand only."""
    env = _env(tmp_path, monkeypatch, scrub_on_free=True)
    barrier = env.rt.barrier
    for device in env.rt.devices:  # every device served a tenant and was released clean
        barrier.mark_allocated(device, TENANT)
        assert barrier.run(device, "deallocated", TENANT).result == "released"
    assert canary.at_start(barrier, env.rt.devices, claimed=lambda _name: False) == []  # start: never-used only
    with pytest.raises(DraConstructsError, match="used since its last barrier"):
        canary.run_selftest(barrier.deps, env.device, "selftest")
    (record,) = canary.on_demand(barrier, env.rt.devices)
    assert record.result == "clean" and record.trigger == "selftest"
    state = barrier.deps.store.load(record.device)
    assert state.phase is Phase.CLEAN and env.kube.tainted(record.device) is None
    # a device whose last barrier failed is refused even on demand
    device = env.device
    barrier.mark_allocated(device, TENANT)
    env.faults.rates["cuda.verify"] = 1.0
    assert barrier.run(device, "deallocated", TENANT).result == "quarantined"
    env.faults.rates["cuda.verify"] = 0.0
    with pytest.raises(DraConstructsError, match="not clean"):
        canary.run_selftest(barrier.deps, device, "selftest", sanitized=True)
