"""``simulate``'s agent turnover scenarios, and negative controls showing their counters can fail."""

from __future__ import annotations

import pytest

from dra_constructs.agent import turnover
from dra_constructs.agent.barrier import Barrier
from dra_constructs.agent.simscenarios import SCENARIOS, TURNOVER_FAILURES, turnover_scenarios


def test_every_scenario_keeps_the_others_processes_and_proves_the_device_clean() -> None:
    counts = turnover_scenarios(2 * len(SCENARIOS), seed=3)
    assert all(counts[f"rounds_{kind}"] == 2 for kind in SCENARIOS)
    assert {k: counts[k] for k in TURNOVER_FAILURES} == dict.fromkeys(TURNOVER_FAILURES, 0)
    assert counts["missed_turnovers"] == 4 and counts["foreign_processes_reported"] >= 2


def test_a_barrier_that_signals_every_process_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Barrier, "_owned", lambda self, c, pid, owned: True)  # the old, owner-blind drain
    counts = turnover_scenarios(len(SCENARIOS), seed=3)
    assert counts["protected_signalled"] > 0


def test_an_agent_that_adopts_a_turnover_silently_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turnover, "missed", lambda state, live: False)
    monkeypatch.setattr(turnover, "same_occupancy", lambda before, now: True)
    counts = turnover_scenarios(2 * len(SCENARIOS), seed=3)
    assert counts["silent_adoptions"] > 0
