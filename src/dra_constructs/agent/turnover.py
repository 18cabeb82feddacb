"""A turnover the agent did not see: another claim holds a device with no barrier in between.

It happens after an agent restart (r01: the previous tenant's claim was deallocated and the
device given to the next one while the agent was down), after an API outage (the first list),
for barriers queued but cancelled at stop, and when the claims watch re-lists (r02). The stored
claims (uids, kept in the device state) are compared with the live ones; disjoint means a
turnover. The previous claims' bytes may still be in memory, so the device is never silently
adopted; and the live claims' processes are never killed (they were not the released claim's):

- guard first (compute mode PROHIBITED; a backend without compute modes, AMD, has only the taint),
  then look at the processes on the device;
- none proven to belong to the live claims (a process of one of their pods): run the turnover
  barrier for the previous claims (it signals only their pods' processes; an owner that cannot be
  read - a process of the previous tenant exiting, say - keeps the device guarded there, killed by
  nobody);
- otherwise the live tenant already runs there: nobody is killed, compute mode goes back to
  DEFAULT for it, an evidence record ``missed-turnover`` (result ``adopted``), a warning Event
  ``MissedTurnover`` and the metric say so, and the device stays allocated to the live claims
  with the previous claims' pods kept, so the next release runs the whole barrier.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from dra_constructs.agent.backends.base import BackendError, ComputeMode, ComputeModeUnsupported
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.evidence import EvidenceRecord
from dra_constructs.agent.health import attest
from dra_constructs.agent.kube import Holders, Tenant
from dra_constructs.agent.state import DeviceState, Phase

if TYPE_CHECKING:
    from dra_constructs.agent.barrier import Barrier

__all__ = ["missed", "resolve", "same_occupancy", "stored_tenant"]

_LOG = logging.getLogger("dra_sanitizer.turnover")


def _names(claims: str | None) -> set[str]:
    return {n for n in (claims or "").split(", ") if n}


def same_occupancy(before: Holders, now: Holders) -> bool:
    """True if a claim of ``before`` still holds the device (by uid; by name where uids are missing)."""
    if before.uids and now.uids:
        return bool(before.uids & now.uids)
    return bool(_names(before.claim) & _names(now.claim))


def missed(state: DeviceState, live: Holders) -> bool:
    """The stored state says other claims held the device than the live ones (no barrier in between)."""
    if state.phase is not Phase.ALLOCATED:
        return False
    if state.claim_uids and live.uids:
        return not set(state.claim_uids) & live.uids
    if state.claim:  # a state written before claim uids were kept: compare the names
        return not _names(state.claim) & _names(live.claim)
    return False


def stored_tenant(state: DeviceState) -> Tenant:
    """The previous claims, as the state remembers them (their policy stays in the state)."""
    return Tenant(state.claim, state.tenant_namespace, None, None, state.boundary, None, tuple(state.pod_uids))


def resolve(barrier: Barrier, device: DeviceInfo, before: Tenant, live: Holders) -> EvidenceRecord:
    """Guard, then the turnover barrier for ``before``, or report and adopt (see the module docstring)."""
    deps = barrier.deps
    clock = deps.clock_for(device.name)
    target: DeviceInfo | None = None
    guarded = False
    pids: list[int] | None
    try:
        target = barrier._current(device)
        if target is not None:
            try:
                deps.nvml.set_compute_mode(target, ComputeMode.PROHIBITED)
                guarded = True
            except ComputeModeUnsupported:
                pass  # no compute mode (AMD): nothing to set, the taint guards it; the processes still decide
        pids = [] if target is None else [p for p in deps.nvml.processes(target) if p not in deps.own_pids]
    except BackendError as error:
        _LOG.warning("%s: cannot list its processes after a missed turnover (%s): running the barrier (it "
                     "signals only %s's processes)", device.name, error, before.claim)
        pids = None
    owners = {pid: deps.owners(pid) for pid in pids or []}
    theirs = [pid for pid, owner in owners.items() if owner.kind == "pod" and owner.pod_uid in live.pods]
    what = (f"claim(s) {live.claim} hold {device.name}, which {before.claim} held with no barrier in between "
            f"(agent restart, API outage or a watch re-list)")
    metrics = deps.metrics
    if not theirs:
        if metrics is not None:
            metrics.missed_turnovers.labels("barrier").inc()
        _LOG.error("%s; guarded, sanitizing before its pods run", what)
        deps.guard.event(device.name, "MissedTurnover", f"{what}: guarded and sanitized before its pods run", clock)
        return barrier.run(device, "missed-turnover", before)
    processes = [{"pid": pid, "owner_kind": owners[pid].kind, "pod_uid": owners[pid].pod_uid,
                  "container": owners[pid].container, "owner": owners[pid].describe(deps.pod_name)} for pid in owners]
    running = ", ".join(owners[pid].describe(deps.pod_name) for pid in theirs)
    reason = (f"{what}; its processes already run there ({running}): nobody "
              f"killed, the previous tenant's memory was not sanitized before them; the next release runs the "
              f"whole barrier")
    record = EvidenceRecord(
        kind="missed-turnover", node=deps.config.node_name, device=device.name, uuid=device.uuid,
        cycle=deps.store.load(device.name, device.uuid).cycle, trigger="missed-turnover", claim=live.claim,
        started_at=clock.wall(), result="adopted", reason=reason, missed_turnover=before.claim,
        pods=sorted(live.pods), foreign_processes=processes, taint=deps.guard.describe(device.name),
        attestation=attest(deps.health, device, deps.scrub_on_free_disabled),
    )
    if guarded and target is not None:
        try:
            deps.nvml.set_compute_mode(target, ComputeMode.DEFAULT)  # its tenant runs: new contexts allowed
        except BackendError as error:
            record.warnings.append(f"compute mode DEFAULT: {error}")
    with deps.store.lock(device.name):
        state = deps.store.load(device.name, device.uuid)
        if state.phase is Phase.ALLOCATED:  # the previous claims' pods stay: the next barrier drains them too
            state.claim, state.claim_uids, state.missed_turnover = None, [], before.claim
            deps.store.save(state)
    for tenant in live.tenants:
        barrier.mark_allocated(device, tenant)
    deps.evidence.write(record)
    if metrics is not None:
        metrics.missed_turnovers.labels("adopted").inc()
    _LOG.error("%s", reason)
    deps.guard.event(device.name, "MissedTurnover", reason, clock)
    return record
