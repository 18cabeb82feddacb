"""A claim's policy may only make the barrier stricter or faster than its DeviceClass allows (review r08, r07)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from dra_constructs.agent.kube import Tenant, allocated_devices
from dra_constructs.agent.policy import SANITIZER_DRIVER, ContextsRemaining, PreemptionPolicy, policy_for

from .conftest import SimEnv
from .fakeapi import claim

POL = {"apiVersion": "sanitizer.dra-constructs.io/v1alpha1", "kind": "PreemptionPolicy"}


def _config(source: str, **parameters: Any) -> dict[str, Any]:
    return {"source": source, "opaque": {"driver": SANITIZER_DRIVER, "parameters": {**POL, **parameters}}}


def _claim(*configs: dict[str, Any]) -> dict[str, Any]:
    body = claim("c1", "team-x", "u1", ["gpu-0"])
    body["status"]["allocation"]["devices"]["config"] = list(configs)
    return body


def test_the_class_bounds_the_claims_grace_and_action() -> None:
    """r08: admin {Kill, 5 s}, tenant {3600 s} or {Quarantine}: the admin's bound holds."""
    admin = _config("FromClass", gracePeriodSeconds=5, onContextsRemaining="Kill")
    slow = allocated_devices([_claim(admin, _config("FromClaim", gracePeriodSeconds=3600))], "node-a")["gpu-0"]
    assert slow.policy is not None and slow.policy.grace_period_seconds == 5
    soft, _ = policy_for(_claim(admin, _config("FromClaim", onContextsRemaining="Quarantine")), "gpu")
    assert soft is not None and soft.on_contexts_remaining is ContextsRemaining.KILL
    faster, _ = policy_for(_claim(admin, _config("FromClaim", gracePeriodSeconds=1)), "gpu")
    assert faster is not None and faster.grace_period_seconds == 1  # shorter: allowed
    # The admin may choose Quarantine; a claim may still ask for Kill (stricter), not the reverse.
    waiting = _config("FromClass", onContextsRemaining="Quarantine")
    assert policy_for(_claim(waiting), "gpu")[0].on_contexts_remaining is ContextsRemaining.QUARANTINE  # type: ignore[union-attr]
    kill, _ = policy_for(_claim(waiting, _config("FromClaim", onContextsRemaining="Kill")), "gpu")
    assert kill is not None and kill.on_contexts_remaining is ContextsRemaining.KILL
    # Without a class policy a claim cannot choose Quarantine either: Kill is the agent's default.
    alone, _ = policy_for(_claim(_config("FromClaim", onContextsRemaining="Quarantine")), "gpu")
    assert alone is not None and alone.on_contexts_remaining is ContextsRemaining.KILL


def test_an_unreadable_claim_policy_is_ignored_not_read_as_strictest() -> None:
    """r07: one misspelled key (gracePeriodSecond) no longer asks for a cold reset and Quarantine."""
    admin = _config("FromClass", gracePeriodSeconds=10)
    typo = {"source": "FromClaim", "opaque": {"driver": SANITIZER_DRIVER, "parameters": {"gracePeriodSecond": 30}}}
    tenant = allocated_devices([_claim(admin, typo)], "node-a")["gpu-0"]
    assert tenant.policy == PreemptionPolicy(grace_period_seconds=10)  # the class policy, nothing else
    assert tenant.policy_problem is not None and "gracePeriodSecond" in tenant.policy_problem
    only_typo = allocated_devices([_claim(typo)], "node-a")["gpu-0"]
    assert only_typo.policy is None and only_typo.policy_problem  # the agent's own settings apply


def test_a_claim_grace_longer_than_the_agents_is_capped(tmp_path: Path) -> None:
    """The drain never waits longer than the agent's grace_period_s (30 s here) for a claim's 3600 s."""
    env = SimEnv(tmp_path)
    env.rt.barrier.run(env.device, "startup-unknown")
    tenant = Tenant("team-x/c", "team-x", "u", PreemptionPolicy(grace_period_seconds=3600))
    env.rt.barrier.mark_allocated(env.device, tenant)
    pids = env.node.start_tenant(env.device.name, [("ignore-term", 0.0)], random.Random(0))
    record = env.rt.barrier.run(env.device, "deallocated")
    assert record.result == "released" and record.pids_sigkill == pids
    assert 30.0 <= record.phase_seconds["drain"] < 32.0  # virtual seconds: SIGKILL at the agent's 30 s
