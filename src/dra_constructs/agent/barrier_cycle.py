"""One barrier cycle's vocabulary: its dependencies, failures, reason prefixes, crash points and bookkeeping.

Shared by the parts of :class:`.barrier.Barrier` (the ``barrier_*`` modules), each a mixin over
:class:`_BarrierBase`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from dra_constructs.agent.backends.base import (
    BackendError,
    ComputeInstanceGuard,
    ComputeMode,
    ComputeModeUnsupported,
    MemoryScrubber,
    NvmlBackend,
    PartitionBackend,
    ProcessSignaller,
)
from dra_constructs.agent.clock import Clock
from dra_constructs.agent.config import AgentConfig
from dra_constructs.agent.devhandles import HandleHolder, HandleScan
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.evidence import EvidenceRecord, EvidenceWriter
from dra_constructs.agent.guard import Guard
from dra_constructs.agent.health import HealthSource, attest
from dra_constructs.agent.metrics import Metrics
from dra_constructs.agent.migaccess import MigAccess
from dra_constructs.agent.owners import Owner
from dra_constructs.agent.policy import PreemptionPolicy
from dra_constructs.agent.state import DeviceState, Phase, StateStore

#: Every point at which fault tests may kill the agent (``crash_hook(device, point)``).
CRASH_POINTS: tuple[str, ...] = (
    "guard", "drain", "drain-signalled", "drain-killed", "verify-contexts", "fill", "fill-opened",
    "filled", "verify", "verified", "releasing", "release-mode", "release-untainted", "quarantine",
    "quarantine-mode", "quarantine-tainted", "resetting", "reset-destroyed", "reset-created", "transient-intent",
    "transient-created", "transient-destroyed",
)


#: Reason prefix of a device quarantined by a claim's ``onContextsRemaining: Quarantine`` policy:
#: the agent itself sanitizes it once NVML reports zero contexts (no operator needed).
AWAITING_ZERO_CONTEXTS = "awaiting zero contexts"


#: Reason prefix of a device held back by processes the released claims did not own (another
#: pod, the host, an unknown owner): never signalled; sanitized once NVML lists none of them.
FOREIGN_CONTEXTS = "foreign contexts"


#: Reason prefix of a release refused because the device-handle scan (:mod:`.devhandles`) cannot
#: rule holders out (the proc root unlistable, capability nodes unmapped, a process's fds or
#: mappings unreadable). Fail closed (the scan was configured, so its answer is part of the proof);
#: the claim's own processes are drained first; retried by the agent until a scan reads everything.
HANDLE_SCAN_FAILED = "device handle scan failed"


_SELF_CLEARING = (AWAITING_ZERO_CONTEXTS, FOREIGN_CONTEXTS, HANDLE_SCAN_FAILED)


#: Reason prefix of a DynamicMIG quarantine whose fill did not count because the transient
#: instance vanished under it (the kubelet plugin destroys instances it did not create when it
#: starts): the agent's tick runs the barrier again, the placement stays guarded meanwhile.
TRANSIENT_VANISHED = "transient instance vanished"


_AFTER_DRAIN = "after the drain"


_GI_CREATE = "nvmlDeviceCreateGpuInstanceWithPlacement"


_SAME_RECOVERY_AS_GUARD = frozenset({Phase.DRAIN, Phase.VERIFY_CONTEXTS, Phase.FILL, Phase.VERIFY})


class BarrierFailure(Exception):
    """The device could not be proven clean; the message is the quarantine reason."""


class _Deferred(BarrierFailure):
    """DynamicMIG: the agent cannot manage MIG; the placement stays guarded, said once node-wide."""


@dataclass
class BarrierDeps:
    """Everything a barrier talks to; real or simulated."""

    config: AgentConfig
    nvml: NvmlBackend
    scrubber: MemoryScrubber
    signaller: ProcessSignaller
    guard: Guard
    store: StateStore
    evidence: EvidenceWriter
    clock_for: Callable[[str], Clock]
    metrics: Metrics | None = None
    crash_hook: Callable[[str, str], None] | None = None
    scrub_on_free_disabled: bool | None = None
    own_pids: set[int] = field(default_factory=set)
    partitions: PartitionBackend | None = None
    #: The current info of every device by name (a cold reset changes a MIG device's UUID).
    inventory: dict[str, DeviceInfo] = field(default_factory=dict)
    #: Static MIG without compute mode (NVML before CUDA 13.3): destroys / recreates compute instances.
    ci_guard: ComputeInstanceGuard | None = None
    #: Why a claim-requested reset of this kind cannot be done here (None: it can); None: always can.
    reset_unavailable: Callable[[str], str | None] | None = None
    #: Who owns a PID (:mod:`.owners`); the default knows nobody, so nothing is signalled.
    owners: Callable[[int], Owner] = lambda _pid: Owner("unknown", detail="no owner lookup")
    #: ``namespace/name`` of a pod UID on this node, if the agent's pod list knows it (reports only).
    pod_name: Callable[[str], str | None] = lambda _uid: None
    #: Why a pod UID of the released claims' ``status.reservedFor`` is not trusted for signalling
    #: (pod UID, the claims ``ns/name, ...``) or None; the agent cross-checks its pod list (:meth:`.Agent.pod_check`).
    pod_check: Callable[[str, str | None], str | None] = lambda _uid, _claims: None
    #: DynamicMIG: whether this process can create/destroy MIG instances (None: assumed it can).
    mig_access: MigAccess | None = None
    #: Health gates and driver-state attestation (:mod:`.health`); None: the backend serves neither.
    health: HealthSource | None = None
    #: Processes holding the device's nodes beyond NVML's lists (:mod:`.devhandles`); None: NVML only.
    device_handles: Callable[[DeviceInfo], HandleScan] | None = None


class _Cycle:
    """The mutable bookkeeping of one run: evidence record + phase timing."""

    def __init__(self, deps: BarrierDeps, device: DeviceInfo, state: DeviceState, trigger: str) -> None:
        self.deps = deps
        self.device = device
        #: The hardware the cycle works on: the device, its current MIG instance, a transient
        #: instance (DynamicMIG), the recreated one after a reset; None: no instance exists.
        self.target: DeviceInfo | None = device
        self.transient: DeviceInfo | None = None
        #: A cold reset was cut off (crash): the instance may be gone or have a new UUID.
        self.resuming_reset = state.phase is Phase.RESETTING or (
            state.reset is not None and state.reset.new_uuid is None)  # or one that failed half-way
        self.state = state
        self.clock = deps.clock_for(device.name)
        self.policy = PreemptionPolicy.model_validate(state.policy) if state.policy else None
        self.record = EvidenceRecord(
            node=deps.config.node_name, device=device.name, uuid=device.uuid, cycle=state.cycle,
            trigger=trigger, claim=state.claim, tenant_namespace=state.tenant_namespace,
            started_at=self.clock.wall(), scrub_on_free_disabled=deps.scrub_on_free_disabled,
            taint=deps.guard.describe(device.name), boundary=state.boundary, policy=state.policy,
            attestation=attest(deps.health, device, deps.scrub_on_free_disabled),
        )
        self._phase: str | None = None
        self._phase_start = 0.0
        #: NVML refused a compute mode on this MIG device (before CUDA 13.3): it is DEFAULT, unguardable so.
        self.mode_unsupported = False
        #: Processes seen holding the device's nodes (:mod:`.devhandles`), by pid, and NVML's pids.
        self.holders: dict[int, HandleHolder] = {}
        self.nvml_pids: set[int] = set()
        #: The latest device-handle scan could not rule holders out: the release is refused once
        #: the claim's own processes are drained (:meth:`.barrier_drain._DrainMixin._scan_problem`).
        self.scan_failure: str | None = None
        #: A cold reset was done in this cycle (the health gates count across it: :func:`.health.check`).
        self.reset_done = False

    def enter(self, phase: Phase, point: str | None = None) -> None:
        """Persist ``phase`` (before its effects), time the previous one, then the crash point."""
        now = self.clock.monotonic()
        if self._phase is not None:
            self.record.phase_seconds[self._phase] = round(now - self._phase_start, 6)
        self._phase, self._phase_start = phase.value, now
        self.state.phase = phase
        self.state.updated = self.clock.wall()
        # Phases after GUARD and before RELEASING all recover alike: no fsync needed for them.
        self.deps.store.save(self.state, durable=phase not in _SAME_RECOVERY_AS_GUARD)
        self.crash(point or phase.value)

    def end_phase(self) -> None:
        if self._phase is not None:
            self.record.phase_seconds[self._phase] = round(self.clock.monotonic() - self._phase_start, 6)
            self._phase = None

    def crash(self, point: str) -> None:
        if self.deps.crash_hook is not None:
            self.deps.crash_hook(self.device.name, point)

    def set_mode(self, mode: ComputeMode) -> bool:
        """Best-effort compute-mode change; failures become warnings in the evidence.

        MIG before the CUDA 13.3 NVML cannot change it: DEFAULT is then True (it is DEFAULT),
        any other mode False with one warning per cycle (the guard is the taint, the
        compute-instance guard at quarantine, and the checks around the fill).
        """
        if self.target is None:
            return False  # no instance at this placement (DynamicMIG): nothing can hold a context
        try:
            self.deps.nvml.set_compute_mode(self.target, mode)
            return True
        except ComputeModeUnsupported as error:
            if mode is ComputeMode.DEFAULT:
                return True  # "On MIG-enabled GPUs, compute mode would be set to DEFAULT"
            if not self.mode_unsupported:
                self.record.warnings.append(
                    f"compute mode {mode.value}: {error}; no compute-mode guard on this MIG device: the taint "
                    f"guards it, a context beside the fill is caught by the checks before and after it")
            self.mode_unsupported = True
            return False
        except BackendError as error:
            self.record.warnings.append(f"compute mode {mode.value}: {error}")
            return False


class _BarrierBase:
    """What every part of :class:`.barrier.Barrier` shares: its dependencies, and the hardware at a device."""

    deps: BarrierDeps

    def _current(self, device: DeviceInfo) -> DeviceInfo | None:
        """The hardware to set a compute mode on: the device, or a DynamicMIG placement's instance (or None).

        DynamicMIG's whole GPU ``gpu-N`` with MIG mode off is the GPU itself (see :meth:`_instance`).
        """
        if device.dynamic and self.deps.partitions is not None:
            return self.deps.partitions.instance(device)
        return device

    def _rekey(self, c: _Cycle, new: DeviceInfo) -> None:
        """The device has a new UUID: state, evidence and the inventory follow it."""
        if c.device.dynamic:
            return
        c.device = new
        c.state.uuid = new.uuid
        c.record.uuid = new.uuid
        self.deps.inventory[new.name] = new
        self.deps.store.save(c.state)
