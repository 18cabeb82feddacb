"""Guards outside a cycle: compute mode PROHIBITED while the API is down or the last pod leaves, and lifted."""

from __future__ import annotations

import contextlib
import logging

from dra_constructs.agent.backends.base import BackendError, ComputeMode, ComputeModeUnsupported
from dra_constructs.agent.barrier_ciguard import _CiGuardMixin
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.state import Phase

_LOG = logging.getLogger("dra_sanitizer.barrier")


class _LocalGuardMixin(_CiGuardMixin):
    """Local (compute-mode) guards the agent sets and lifts between cycles."""

    def prohibit(self, device: DeviceInfo, why: str) -> bool:
        """Compute mode PROHIBITED on the hardware at ``device`` now (a DynamicMIG placement: its real
        instance, never the placeholder UUID). True if set, or if no instance exists (nothing to guard)."""
        try:
            target = self._current(device)
            if target is None:
                return True
            self.deps.nvml.set_compute_mode(target, ComputeMode.PROHIBITED)
            return True
        except BackendError as error:
            _LOG.warning("%s: cannot set PROHIBITED (%s): %s", device.name, why, error)
            return False

    def guard_unknown_locally(self, device: DeviceInfo) -> str:
        """API down and no saved state: refuse NEW contexts (compute mode PROHIBITED), signal nobody.

        Existing contexts are not touched (PROHIBITED only stops new ones), so a tenant whose claim
        the agent cannot see keeps running. Returns ``compute-mode`` (set), ``no-instance``
        (DynamicMIG placement without an instance: nothing can hold a context, nothing to set;
        retried), ``compute-instance`` (MIG before CUDA 13.3: its compute instances destroyed instead,
        possible only while no process holds one; recreated, with a new UUID, when lifted), ``none``
        (a whole device whose backend has no compute mode, AMD: no local guard exists; nothing is
        recorded as guarded, no barrier runs and nobody is signalled until the claims are known),
        ``failed`` (NVML refused; logged, retried) or ``known`` (the device has a state).
        """
        with self.deps.store.lock(device.name):
            state = self.deps.store.load(device.name, device.uuid)
            if state.phase is not Phase.UNKNOWN:
                return "known"
            if state.ci_guard is not None:
                return "compute-instance"  # destroyed already (an earlier tick)
            try:
                target = self._current(device)
            except BackendError as error:
                _LOG.error("%s: cannot look up its instance while the API is unknown: %s", device.name, error)
                return "failed"
            if target is None:
                return "no-instance"
            state.uuid, state.local_guard = device.uuid, True  # the intent first: a lift restores DEFAULT
            state.updated = self.deps.clock_for(device.name).wall()
            self.deps.store.save(state)
            try:
                self.deps.nvml.set_compute_mode(target, ComputeMode.PROHIBITED)
            except ComputeModeUnsupported as error:
                if not target.is_mig:  # no compute mode on this backend (AMD): nothing local to set
                    state.local_guard = False  # never said guarded: nothing to lift, and the API's answer says so
                    self.deps.store.save(state)
                    _LOG.error("%s: never sanitized (no saved state) and the claims are unknown: no local guard "
                               "exists (%s); no barrier runs and nobody is signalled until the API answers, but "
                               "nothing keeps a new tenant's process off it meanwhile", device.name, error)
                    return "none"
                # MIG before CUDA 13.3: no compute instance, no new context
                problem = self._close_instances(device, target, state, self.deps.clock_for(device.name))
                if problem is not None:
                    _LOG.error("%s: never sanitized, claims unknown: %s", device.name, problem)
                    return "failed"
                return "compute-instance"
            except BackendError as error:
                _LOG.error("%s: never sanitized, claims unknown, and compute mode PROHIBITED failed: nothing "
                           "keeps a new context off it (%s); retrying", device.name, error)
                return "failed"
        _LOG.error("%s: never sanitized (no saved state) and the claims are unknown: compute mode PROHIBITED "
                   "(no new context; running ones untouched, nobody killed) until the API answers", device.name)
        return "compute-mode"

    def lift_local_guard(self, device: DeviceInfo) -> bool:
        """A live claim holds a device guarded while the API was down: its tenant may create contexts again.

        Called after the ``in-use`` taint is placed. True if the compute mode is back to DEFAULT
        (or there was nothing to lift); False if NVML refused (kept PROHIBITED: costs the tenant
        new contexts, exposes nothing; retried by the agent's tick).
        """
        with self.deps.store.lock(device.name):
            state = self.deps.store.load(device.name, device.uuid)
            if not state.local_guard:
                return True
            if state.phase is not Phase.ALLOCATED:
                return False  # not known to be held: the guard stays (a barrier takes it over)
            try:
                if state.ci_guard is not None:
                    self._reopen(device, state, self.deps.clock_for(device.name))
                else:
                    self._restore_default(device)
            except BackendError as error:
                _LOG.error("%s: held by %s, but restoring compute mode DEFAULT failed (retried): %s",
                           device.name, state.claim, error)
                return False
            state.local_guard = False
            self.deps.store.save(state)
        _LOG.warning("%s: held by %s: the compute-mode guard set while the API was down is lifted (the in-use "
                     "taint guards it; sanitized when released)", device.name, state.claim)
        return True

    def _restore_default(self, device: DeviceInfo) -> None:
        """Compute mode DEFAULT on the hardware at ``device`` now (none there: nothing to restore;
        MIG before CUDA 13.3: it is DEFAULT all along). Other NVML errors raise."""
        target = self._current(device)
        if target is not None:
            with contextlib.suppress(ComputeModeUnsupported):
                self.deps.nvml.set_compute_mode(target, ComputeMode.DEFAULT)

    def tenant_leaving(self, device: DeviceInfo) -> None:
        """The last pod using the device is terminating: without taints, refuse new contexts now.

        Recorded (``leaving_guard``) so :meth:`tenant_back` lifts it if a running pod holds the
        claim again before it is released (a no-surge rollout on a shared claim).
        """
        if self.deps.guard.has_taints:
            return
        with self.deps.store.lock(device.name):
            state = self.deps.store.load(device.name, device.uuid)
            if state.phase is not Phase.ALLOCATED or state.leaving_guard:
                return  # mid-barrier or quarantined: the barrier owns the compute mode
            state.leaving_guard = True  # the intent first: tenant_back restores DEFAULT
            self.deps.store.save(state)
            if not self.prohibit(device, "tenant leaving"):  # a DynamicMIG placement: its real instance
                _LOG.error("%s: no taint API and compute mode PROHIBITED failed", device.name)

    def tenant_back(self, device: DeviceInfo) -> bool:
        """A running pod holds the claim again: lift the :meth:`tenant_leaving` guard (DEFAULT).

        True if lifted or nothing to lift; False if NVML refused (kept, retried on the next change).
        """
        with self.deps.store.lock(device.name):
            state = self.deps.store.load(device.name, device.uuid)
            if not state.leaving_guard or state.phase is not Phase.ALLOCATED:
                return True
            try:
                self._restore_default(device)
            except BackendError as error:
                _LOG.error("%s: a running pod holds %s again, but compute mode DEFAULT failed: %s",
                           device.name, state.claim, error)
                return False
            state.leaving_guard = False
            self.deps.store.save(state)
        _LOG.warning("%s: a running pod holds %s again: compute mode DEFAULT (its pods may create contexts)",
                     device.name, state.claim)
        return True
