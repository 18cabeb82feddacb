"""The hardware a cycle works on: a MIG instance, DynamicMIG's transient instance, MIG mode off."""

from __future__ import annotations

import contextlib

from dra_constructs.agent.backends.base import BackendError, ComputeMode
from dra_constructs.agent.barrier_cycle import (
    _GI_CREATE,
    TRANSIENT_VANISHED,
    BarrierFailure,
    _BarrierBase,
    _Cycle,
    _Deferred,
)
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.migaccess import MIG_UNMANAGEABLE
from dra_constructs.agent.state import Phase


class _InstancesMixin(_BarrierBase):
    """Finding, creating and losing the instance at a device."""

    # --- partitions: DynamicMIG and cold reset ----------------------------------------------

    def _instance(self, c: _Cycle) -> DeviceInfo | None:
        """The hardware at the device now: itself, its current MIG instance, or None (no instance).

        DynamicMIG: an instance the agent made (``transient_uuid``, or any found while
        ``transient_pending`` says a create was under way when a crash cut it off) is its own
        transient, destroyed at the release; its own GPU instance without a compute instance (a
        create cut off half-way) is destroyed now. MIG mode off on the GPU (Hopper+: the driver
        turns it off when its last instance goes): see :meth:`_mig_off_target`.
        """
        parts = self.deps.partitions
        if parts is None or not (c.device.dynamic or (c.device.is_mig and c.resuming_reset)):
            return c.device  # static devices: no extra NVML calls unless a reset was cut off
        if c.device.dynamic and not self._mig_enabled(c.device):
            return self._mig_off_target(c)
        found = parts.instance(c.device)
        ours = c.state.transient_uuid == (found.uuid if found else None) or c.state.transient_pending
        if found is not None and (ours if c.device.dynamic else c.state.transient_uuid == found.uuid):
            c.transient = found  # ours, from a cycle cut off by a crash: destroyed at the release
        if found is None and c.device.dynamic and self._half_made(c.device):
            if not c.state.transient_pending:
                raise BarrierFailure("a GPU instance without a compute instance is at the placement and the agent "
                                     "did not create it (the DRA driver preparing a claim?): not touched")
            c.record.warnings.append("destroyed the agent's own GPU instance left without a compute instance")
            parts.destroy(c.device)
            c.state.transient_pending = False
            self.deps.store.save(c.state)
        if found is not None and not c.device.dynamic and found.uuid != c.device.uuid:
            self._rekey(c, found)  # recreated (a reset finished before a crash)
        return found

    def _mig_enabled(self, device: DeviceInfo) -> bool:
        check = getattr(self.deps.partitions, "mig_enabled", None)
        return True if check is None else bool(check(device))

    def _half_made(self, device: DeviceInfo) -> bool:
        """A GPU instance at the placement that has no compute instance (no MIG device handle)."""
        check = getattr(self.deps.partitions, "gpu_instance_exists", None)
        return False if check is None else bool(check(device))

    def _mig_off_target(self, c: _Cycle) -> DeviceInfo:
        """MIG mode is off: the GPU is one device; the placement's memory is the whole GPU's.

        ``gpu-N`` itself: the GPU. A placement: the whole GPU is filled (it holds the placement's
        slices), unless a claim holds ``gpu-N``: then its tenant owns that memory now, nothing is
        filled or killed, and the placement is quarantined (the whole GPU's own barrier covers it).
        """
        if c.device.whole_gpu:
            return c.device
        whole = self._whole_gpu(c.device)
        if whole is None:
            raise BarrierFailure("MIG mode is off on the GPU and the agent knows no whole-GPU device to fill")
        held = self.deps.store.load(whole.name, whole.uuid)
        if held.phase is Phase.ALLOCATED:
            raise BarrierFailure(f"MIG mode is off and the whole GPU {whole.name} is held by claim {held.claim}: "
                                 "the placement's memory is that tenant's now; nothing filled, nobody killed")
        c.record.warnings.append(f"MIG mode off: the whole GPU {whole.name} is filled for this placement")
        return whole

    def _whole_gpu(self, device: DeviceInfo) -> DeviceInfo | None:
        return next((d for d in self.deps.inventory.values() if d.whole_gpu and d.gpu_uuid == device.gpu_uuid), None)

    def _whole_gpu_free(self, device: DeviceInfo) -> DeviceInfo | None:
        """The whole GPU of ``device`` if no claim holds it (None otherwise, or if there is none)."""
        whole = self._whole_gpu(device)
        if whole is None or self.deps.store.load(whole.name, whole.uuid).phase is Phase.ALLOCATED:
            return None
        return whole

    def _create_transient(self, c: _Cycle) -> None:
        """No instance at the placement: create one to fill (DynamicMIG), or recreate a lost static one.

        DynamicMIG: the intent is saved durably before the create (``transient_pending``), the
        UUID right after it, before anything else can fail or be killed; a create that fails
        looks again: an instance the DRA driver created meanwhile (the next claim's prepare) is
        the quarantine's target, so the guard lands on it; NO_PERMISSION defers (see
        :mod:`.migaccess`).
        """
        parts = self.deps.partitions
        if parts is None:
            raise BarrierFailure("no MIG instance at the placement and no partition backend to create one")
        if c.device.dynamic:
            access = self.deps.mig_access
            if access is not None and access.problem is not None:
                raise _Deferred(f"{MIG_UNMANAGEABLE}: {access.problem}")
            c.state.transient_pending = True
            self.deps.store.save(c.state)
            c.crash("transient-intent")
        try:
            created = parts.create(c.device)
        except BackendError as error:
            if c.device.dynamic:
                self._create_failed(c, error)
            raise
        c.target = created
        if c.device.dynamic:
            c.transient = created
            c.record.transient_instance = created.uuid
            c.state.transient_uuid, c.state.transient_pending = created.uuid, False
            self.deps.store.save(c.state)
        else:
            self._rekey(c, created)
        c.set_mode(ComputeMode.PROHIBITED)  # a new instance starts in DEFAULT
        c.crash("transient-created")

    def _create_failed(self, c: _Cycle, error: BackendError) -> None:
        """The transient create failed: what is at the placement now decides the quarantine's target."""
        parts = self.deps.partitions
        assert parts is not None
        # Our own GI exists only if its create passed (the CI create failed, and so did the cleanup).
        own_gi = error.op != _GI_CREATE
        if "NO_PERMISSION" in str(error).upper().replace(" ", "_") or "Insufficient Permissions" in str(error):
            c.state.transient_pending = own_gi and self._half_made(c.device)
            self.deps.store.save(c.state)
            if self.deps.mig_access is not None:
                self.deps.mig_access.refused(f"NVML refused to create a GPU instance ({error})")
                raise _Deferred(f"{MIG_UNMANAGEABLE}: NVML refused to create a GPU instance ({error})") from error
            return
        found = parts.instance(c.device)
        c.state.transient_pending = own_gi and found is None and self._half_made(c.device)  # destroyed next time
        self.deps.store.save(c.state)
        if found is not None:
            c.target = found  # the quarantine guards it (PROHIBITED on its real UUID)
            raise BarrierFailure(
                f"an instance appeared at the placement during the barrier ({found.uuid}: the DRA driver prepared "
                f"the next claim) before the fill; its memory was never sanitized: guarded, nothing killed "
                f"({error})") from error

    def _vanished(self, c: _Cycle, reason: str) -> str:
        """A failure: did the transient vanish (kubelet plugin restart)? DynamicMIG: guard what is there now.

        Without a transient, an instance found at the placement (the DRA driver prepared the next
        claim meanwhile) becomes the quarantine's target, so its guard lands on the real UUID.
        """
        parts = self.deps.partitions
        if not c.device.dynamic or parts is None:
            return reason
        if c.transient is None:
            with contextlib.suppress(BackendError):
                found = parts.instance(c.device) if self._mig_enabled(c.device) else None
                if found is not None:
                    c.target = found
            return reason
        try:
            found = parts.instance(c.device)
        except BackendError:
            return reason
        if found is not None and found.uuid == c.transient.uuid:
            return reason
        gone = c.transient.uuid
        c.transient, c.target = None, found  # not ours any more; whatever is there now gets the guard
        c.state.transient_uuid, c.state.transient_pending = None, False
        return (f"{TRANSIENT_VANISHED} ({gone}; the GPU kubelet plugin destroys instances it did not create "
                f"when it starts): the fill does not count, the barrier runs again ({reason})")
