"""The drain: list the device's processes, signal only the released claims' own, report foreign ones."""

from __future__ import annotations

import signal

from dra_constructs.agent.backends.base import BackendError
from dra_constructs.agent.barrier_cycle import (
    _AFTER_DRAIN,
    AWAITING_ZERO_CONTEXTS,
    FOREIGN_CONTEXTS,
    HANDLE_SCAN_FAILED,
    BarrierFailure,
    _BarrierBase,
    _Cycle,
)
from dra_constructs.agent.devhandles import HandleScan
from dra_constructs.agent.policy import ContextsRemaining


class _DrainMixin(_BarrierBase):
    """Drain and context checks (NVML lists plus the device-handle scan)."""

    def _processes(self, c: _Cycle) -> list[int] | None:
        """NVML's process list; None on a transient error (a fatal one raises)."""
        assert c.target is not None
        try:
            return self.deps.nvml.processes(c.target)
        except BackendError as error:
            if error.fatal:
                raise
            c.record.warnings.append(str(error))
            return None

    def _drain(self, c: _Cycle) -> None:
        cfg = self.deps.config
        grace, timeout = cfg.grace_period_s, cfg.drain_timeout_s
        kill = True
        if c.policy is not None:  # the claim's own policy (guideline rule 4): it may only shorten
            if c.policy.grace_period_seconds is not None:
                grace = min(grace, c.policy.grace_period_seconds)
            kill = c.policy.on_contexts_remaining is ContextsRemaining.KILL
        start = c.clock.monotonic()
        killed = False
        termed: set[int] = set()
        owned = frozenset(c.state.pod_uids)
        known: set[int] = set()  # the claim's processes of the last poll: pinned again before this one's listing
        held: list[int] = []
        while True:
            now = c.clock.monotonic()
            self._pin_ahead(c, known, owned)
            pids = self._processes(c)
            if pids is not None:
                pids = [p for p in self._with_holders(c, pids) if p not in self.deps.own_pids]
                mine = [p for p in pids if self._owned(c, p, owned)]
                others = [p for p in pids if p not in mine]
                self._foreign(c, others, owned)
                if not mine:
                    if others:
                        self._foreign_failure(c)
                    if c.scan_failure is not None:  # the claim's own are gone; others cannot be ruled out
                        raise BarrierFailure(c.scan_failure)
                    return
                known = set(mine)
                held = mine  # all of them, for the timeout's reason (one pinned only now is not signalled yet)
                # Pinned before this poll's listing, owner read after it: a PID reused in between is not the one read.
                pids = [p for p in self._pinned(mine) if self._owned(c, p, owned)]
                if kill and not killed and now - start >= grace:
                    killed = True
                    c.crash("drain-killed")
                if killed:
                    for pid in pids:  # recorded once sent: a refused signal raises and is not evidence
                        self.deps.signaller.signal(pid, signal.SIGKILL)
                        if pid not in c.record.pids_sigkill:
                            c.record.pids_sigkill.append(pid)
                else:
                    for pid in pids:
                        if pid not in termed:
                            termed.add(pid)
                            self.deps.signaller.signal(pid, signal.SIGTERM)
                            c.record.pids_sigterm.append(pid)
                    c.crash("drain-signalled")
            if now - start >= timeout:
                still = "unknown (NVML failing)" if pids is None else ", ".join(map(str, held))
                if c.record.foreign_processes:
                    still += f"; and foreign contexts, never signalled: {self._foreign_text(c)}"
                if c.scan_failure is not None:
                    still += f"; and {c.scan_failure}"
                if not kill:
                    raise BarrierFailure(f"{AWAITING_ZERO_CONTEXTS} (claim policy onContextsRemaining: "
                                         f"Quarantine; no SIGKILL): pids {still} after {timeout:g}s")
                raise BarrierFailure(f"drain timeout after {timeout:g}s: contexts still held by "
                                     f"pids {still}")
            c.clock.sleep(cfg.poll_interval_s)

    def _with_holders(self, c: _Cycle, pids: list[int]) -> list[int]:
        """NVML's pids plus every process holding the device's nodes (one ``/proc/*/fd`` scan)."""
        c.nvml_pids.update(pids)
        if self.deps.device_handles is None or c.target is None:
            return pids
        scan = self.deps.device_handles(c.target)
        c.record.device_handle_scan = scan.summary()
        self._scan_problem(c, scan)
        c.holders.update({h.pid: h for h in scan.holders})
        return pids + [h.pid for h in scan.holders if h.pid not in pids]

    def _scan_problem(self, c: _Cycle, scan: HandleScan) -> None:
        """A scan that cannot rule holders out: Warning Event, metric, and the release is refused (fail closed).

        The refusal waits for the drain: the claim's own processes (known by their cgroups, not by the
        scan) are still signalled, so a failed scan does not leave them running on a quarantined
        device; :attr:`_Cycle.scan_failure` then refuses the release. The latest scan decides: one
        that reads everything clears it. The Event and the metric come once per cycle and problem.
        """
        c.scan_failure = None
        if scan.problem is None:
            return
        note = f"device handle scan failed: {scan.problem}"
        if note not in c.record.warnings:
            c.record.warnings.append(note)
            if self.deps.metrics is not None:
                self.deps.metrics.handle_scan_problems.labels("failed").inc()
            self.deps.guard.event(c.device.name, "DeviceHandleScanFailed", f"{note}; processes holding the "
                                  "device's nodes cannot be ruled out: the release is refused", c.clock)
        c.scan_failure = (f"{HANDLE_SCAN_FAILED}: {scan.problem}; processes holding the device's nodes "
                          f"cannot be ruled out (retried until a scan runs)")

    def _owned(self, c: _Cycle, pid: int, owned: frozenset[str]) -> bool:
        """True if ``pid`` runs in a pod of the released claims (the only processes ever signalled).

        The pod (named by the process's own cgroup, :mod:`.owners`) must be in the claims'
        ``status.reservedFor`` *and* pass :attr:`BarrierDeps.pod_check` (the agent's pod list says
        it uses the claim, or knows no such pod: see docs/threat-model.md).
        """
        owner = self.deps.owners(pid)
        return owner.kind == "pod" and owner.pod_uid in owned and self._untrusted(c, owner.pod_uid) is None

    def _untrusted(self, c: _Cycle, pod_uid: str | None) -> str | None:
        """Why a reservedFor pod UID is not trusted for signalling (None: it is); said once per pod in the record."""
        if pod_uid is None:
            return "no pod"
        problem = self.deps.pod_check(pod_uid, c.state.claim)
        note = f"reservedFor pod {pod_uid} not trusted: {problem}"
        if problem is not None and note not in c.record.warnings:
            c.record.warnings.append(note)
        return problem

    def _foreign(self, c: _Cycle, pids: list[int], owned: frozenset[str]) -> None:
        """Record processes the released claims do not own (once per pid): reported, never signalled."""
        seen = {p.get("pid") for p in c.record.foreign_processes}
        for pid in pids:
            if pid in seen:
                continue
            owner = self.deps.owners(pid)
            if owner.kind == "pod" and owner.pod_uid in owned and self._untrusted(c, owner.pod_uid) is None:
                continue  # it became ours between the two reads: the next poll signals it
            holder = c.holders.get(pid)
            c.record.foreign_processes.append({
                "pid": pid, "owner_kind": owner.kind, "pod_uid": owner.pod_uid, "container": owner.container,
                "owner": owner.describe(self.deps.pod_name), "nvml_listed": pid in c.nvml_pids,
                "device_nodes": list(holder.paths) if holder else [], "comm": holder.comm if holder else None,
                "mps": holder.mps if holder else None})

    @staticmethod
    def _foreign_text(c: _Cycle) -> str:
        return ", ".join(f"pid {p['pid']} ({p['owner']})" + ("" if p.get("nvml_listed", True) else
                         f" holding {', '.join(p['device_nodes'])}") for p in c.record.foreign_processes)

    def _foreign_failure(self, c: _Cycle) -> None:
        """Foreign contexts outlive the released claims' processes: Event, then keep the guard (quarantine)."""
        who = self._foreign_text(c)
        message = (f"{len(c.record.foreign_processes)} process(es) the released claim(s) "
                   f"{c.state.claim or '(none)'} did not own hold a context or the device's nodes: {who}; never "
                   f"signalled, the device stays guarded and is sanitized once they are gone")
        self.deps.guard.event(c.device.name, "ForeignContexts", message, c.clock)
        raise BarrierFailure(f"{FOREIGN_CONTEXTS}: {who}; never signalled (not the released claim's)")

    def _pin_ahead(self, c: _Cycle, known: set[int], owned: frozenset[str]) -> None:
        """Pin (pidfd) the claim's processes NVML lists now and those of the last poll, before this poll's listing.

        The poll's own listing (NVML and the one device-handle scan) then comes after their pidfds
        exist, so it is the fresh listing :meth:`_pinned` asks for, and a poll costs one scan, not
        two (docs/sanitizer-runtime.md, "Drain beyond NVML's lists"). Only a guess of whom to pin:
        nothing is signalled here, and whether a pid is the claim's is read again after the listing.
        """
        pin = getattr(self.deps.signaller, "pin", None)
        if pin is None:
            return
        listed = self._processes(c) or []
        for pid in sorted(known.union(listed)):
            if pid not in self.deps.own_pids and self._owned(c, pid, owned):
                pin(pid)

    def _pinned(self, pids: list[int]) -> list[int]:
        """The listed pids that are safe to signal now: their pidfd existed before this poll's listing.

        A PID can be reused between a listing and the first signal; a pidfd opened after that
        would point at the PID's next owner. So a pid pinned only now (``pin`` True: a process
        :meth:`_pin_ahead` did not guess, e.g. one only the scan found) is not signalled in this
        poll: it waits for the next poll's listing, which comes after its pidfd, and is signalled
        there if that listing (and the owner read after it) still names it. Pids already pinned
        were pinned ahead of this listing. A signaller without pidfds (``pin`` absent or False)
        signals by number, as before pinning existed.
        """
        pin = getattr(self.deps.signaller, "pin", None)
        if pin is None:
            return pids
        fresh = {p for p in pids if pin(p)}
        return [p for p in pids if p not in fresh]

    def _verify_no_contexts(self, c: _Cycle, allowed: set[int], what: str) -> None:
        for _ in range(3):  # a transient NVML error gets two more tries
            pids = self._processes(c)
            if pids is not None:
                others = [p for p in pids if p not in allowed and p not in self.deps.own_pids]
                if what == _AFTER_DRAIN:
                    c.record.contexts_after_drain = len(others)
                if others:
                    owners = ", ".join(f"{p} ({self.deps.owners(p).describe(self.deps.pod_name)})" for p in others)
                    raise BarrierFailure(f"{len(others)} context(s) on the device {what}: pids {owners}")
                return
            c.clock.sleep(self.deps.config.poll_interval_s)
        raise BarrierFailure(f"cannot list the device's processes {what}: NVML keeps failing")
