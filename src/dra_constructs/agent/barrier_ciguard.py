"""The compute-instance guard: static MIG where NVML cannot set a compute mode (before CUDA 13.3)."""

from __future__ import annotations

import dataclasses
import logging

from dra_constructs.agent.backends.base import BackendError
from dra_constructs.agent.barrier_cycle import BarrierFailure, _BarrierBase, _Cycle
from dra_constructs.agent.clock import Clock
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.state import CiGuardRecord, DeviceState

_LOG = logging.getLogger("dra_sanitizer.barrier")


class _CiGuardMixin(_BarrierBase):
    """Destroy a slice's compute instances as the guard; recreate them."""

    # --- the compute-instance guard: static MIG where compute mode cannot be set ----------------

    def _close_instances(self, device: DeviceInfo, target: DeviceInfo, state: DeviceState, clock: Clock) -> str | None:
        """Destroy the slice's compute instances so no context can be created on it; None, or why not.

        Only where no listed process holds a context (NVML would answer IN_USE, and those are the
        processes the drain is for). The intent is saved first, then the layout that was destroyed.
        """
        ci = self.deps.ci_guard
        if ci is None or not target.is_mig or device.dynamic:
            return (f"{device.name}: compute mode cannot be set and this backend has no compute-instance guard: "
                    f"only the taint keeps new contexts off it")
        try:
            pids = [p for p in self.deps.nvml.processes(target) if p not in self.deps.own_pids]
        except BackendError as error:
            return f"compute-instance guard of {device.name}: cannot list its processes ({error}); retried"
        if pids:
            return (f"compute-instance guard of {device.name}: pids {', '.join(map(str, pids))} hold contexts, so "
                    f"its compute instances cannot be destroyed (IN_USE): not guarded locally, the taint guards "
                    f"it; retried")
        state.ci_guard = CiGuardRecord(device=dataclasses.asdict(device), closed_at=clock.wall())
        self.deps.store.save(state)
        try:
            layout = ci.close(target)
        except BackendError as error:
            if self._instances_intact(device, target):
                state.ci_guard = None
            self.deps.store.save(state)
            return (f"compute-instance guard of {device.name}: {error}: not guarded locally (a process NVML does "
                    f"not list may hold a context); the taint guards it; retried")
        state.ci_guard.layout = layout
        self.deps.store.save(state)
        _LOG.warning("%s: compute mode cannot be set (MIG, NVML before CUDA 13.3): its compute instances are "
                     "destroyed so no context can be created on it until the barrier recreates them", device.name)
        return None

    def _instances_intact(self, device: DeviceInfo, target: DeviceInfo) -> bool:
        """True if every compute instance of ``target`` still exists (a refused destroy destroyed none)."""
        if self.deps.partitions is None:
            return False
        try:
            found = self.deps.partitions.instance(device)
        except BackendError:
            return False  # unsure: keep the record, the reopen creates only what is missing
        before = set(target.compute_instance_uuids or (target.uuid,))
        return found is not None and set(found.compute_instance_uuids or (found.uuid,)) == before

    def _reopen(self, device: DeviceInfo, state: DeviceState, clock: Clock) -> DeviceInfo:
        """Recreate the compute instances destroyed as the guard; state and inventory follow the new UUID."""
        ci, record = self.deps.ci_guard, state.ci_guard
        assert record is not None
        if ci is None:
            raise BarrierFailure(f"{device.name}: its compute instances were destroyed as the guard and this "
                                 f"backend cannot recreate them")
        new = ci.reopen(device, record.layout)
        state.ci_guard = None
        state.uuid = new.uuid
        self.deps.inventory[new.name] = new
        self.deps.store.save(state)
        self.deps.guard.event(device.name, "ComputeInstancesRecreated",
                              f"compute instances destroyed as the guard are recreated: {device.uuid} -> {new.uuid}; "
                              f"the DRA driver publishes MIG UUIDs: restart its kubelet plugin so it re-enumerates",
                              clock, warning=False)
        return new

    def _reopen_instances(self, c: _Cycle) -> None:
        """In a cycle: recreate the destroyed compute instances; the fill runs on them."""
        old = c.device.uuid
        new = self._reopen(c.device, c.state, c.clock)
        c.target = new
        c.record.compute_instances_recreated = [old, new.uuid]
        self._rekey(c, new)
