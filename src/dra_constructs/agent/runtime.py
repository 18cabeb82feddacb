"""Wiring: build the backends, the guard and the barrier from an :class:`AgentConfig`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dra_constructs.agent import canary
from dra_constructs.agent.backends.base import (
    BackendError,
    ComputeInstanceGuard,
    EnumerationResult,
    MemoryScrubber,
    NvmlBackend,
    PartitionBackend,
    ProcessSignaller,
    host_pid_namespace,
    host_signaller,
    lsm_confinement,
)
from dra_constructs.agent.backends.simulated import SimulatedNode
from dra_constructs.agent.barrier import Barrier, BarrierDeps
from dra_constructs.agent.clock import Clock, RealClock
from dra_constructs.agent.config import AgentConfig
from dra_constructs.agent.devhandles import DeviceHandles, HandleScan
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.evidence import EvidenceWriter
from dra_constructs.agent.guard import Guard
from dra_constructs.agent.health import HealthSource
from dra_constructs.agent.isolation import Isolation
from dra_constructs.agent.kube import ApiError, KubeClient, KubeOps, retrying
from dra_constructs.agent.lifecycle import Lifecycle, seed_from_phases
from dra_constructs.agent.limits import worker_slots
from dra_constructs.agent.metrics import Metrics
from dra_constructs.agent.migaccess import MigAccess, check_mig_config
from dra_constructs.agent.owners import Owner, ProcOwners
from dra_constructs.agent.state import DeviceState, Phase, StateStore
from dra_constructs.errors import DraConstructsError
from dra_constructs.target import Target

__all__ = ["Runtime", "build_runtime", "confinement_warning"]

_LOG = logging.getLogger("dra_sanitizer")


@dataclass
class Runtime:
    """A ready-to-use barrier and what it was built from."""

    config: AgentConfig
    target: Target
    devices: list[DeviceInfo]
    barrier: Barrier
    guard: Guard
    metrics: Metrics
    kube: KubeClient | None = None
    node: SimulatedNode | None = None
    #: The enumeration ``devices`` came from, with the GPUs / MIG instances NVML could not read.
    enumeration: EnumerationResult | None = None
    #: MIG isolation taints (:mod:`.isolation`); None where it was not built (tests building a Runtime by hand).
    isolation: Isolation | None = None

    def device(self, name: str) -> DeviceInfo:
        """A device by DRA name or UUID; a clear error naming the devices there are."""
        for info in [*self.barrier.deps.inventory.values(), *self.devices]:  # current infos first
            if name in (info.name, info.uuid):
                return info
        raise DraConstructsError(
            f"node {self.config.node_name or '?'}", "--device", name, "no such device on this node",
            f"use one of {', '.join(d.name for d in self.devices) or '(none found)'}",
        )


def confinement_warning(label: str) -> str:
    """The start-up warning for a confined agent (:func:`lsm_confinement`): what refuses it, and exactly what to set.

    An SELinux context (``user:role:type:level``) names its type and the ``seLinuxOptions`` to set; anything
    else is an AppArmor profile and gets ``appArmorProfile: Unconfined``.
    """
    parts = label.split(":")
    if len(parts) > 2:  # SELinux: lsm_confinement returns only the container_* domains
        domain = parts[2]
        return (f"the agent runs in the SELinux domain {domain} ({label}): SELinux refuses {domain} reads of other "
                "processes' /proc/<pid>/fd, maps, map_files and exe and signals to them, so every device-handle scan "
                "fails closed and no device is released; set securityContext.seLinuxOptions.type: spc_t on the "
                "agent container (SanitizerDaemonSet(se_linux_type=\"spc_t\"), its default; the namespace must be "
                "Pod Security privileged) or a type of your policy that may read and signal every process")
    return (f"the agent runs under the AppArmor profile {label}: it allows ptrace reads and signals only to peers "
            "under the same profile, so reads of other processes' /proc/<pid>/fd, maps and exe are refused, every "
            "device-handle scan fails closed and no device is released; set securityContext.appArmorProfile: "
            "{type: Unconfined} on the agent container (SanitizerDaemonSet sets it on the unprivileged pod)")


def build_runtime(
    config: AgentConfig,
    *,
    kube_ops: KubeOps | None = None,
    node: SimulatedNode | None = None,
    crash_hook: Callable[[str, str], None] | None = None,
    fsync: bool = True,
) -> Runtime:
    """Build everything for ``config``. ``kube_ops``/``node`` replace the real ones (tests, simulate)."""
    if not config.node_name:
        raise DraConstructsError("AgentConfig", "node_name", "", "the node name is required (it is the DRA pool)",
                                 "set node_name (the DaemonSet passes spec.nodeName) or --node")
    nvml: NvmlBackend
    scrubber: MemoryScrubber
    signaller: ProcessSignaller
    clock_for: Callable[[str], Clock]
    partitions: PartitionBackend | None = None
    owners: Callable[[int], Owner]
    ci_guard: ComputeInstanceGuard | None = None
    health: HealthSource | None = None
    handles: Callable[[DeviceInfo], HandleScan] | None = None
    scanner: DeviceHandles | None = None
    if config.backend == "simulated":
        node = node or SimulatedNode(config.simulated)
        nvml, scrubber, signaller, clock_for = node.nvml, node.scrubber, node.signaller, node.clock
        partitions = node.partitions
        health = node.health
        owners = ProcOwners(read=node.cgroup_text)  # the simulated processes' cgroup files, same format
    elif config.backend == "amd":
        from dra_constructs.agent.backends.amd_wiring import amd_backends
        from dra_constructs.agent.devhandles_amd import AmdDeviceHandles

        smi, scrubber, health = amd_backends(config)
        nvml = smi
        if not host_pid_namespace():
            _LOG.error("not in the host PID namespace: AMD SMI's PIDs are host PIDs, so the agent signals nothing "
                       "and a device with processes left is quarantined (set hostPID: true)")
        signaller = host_signaller()
        owners = ProcOwners(config.proc_root)
        if config.device_handles:  # render and card node of the device, and /dev/kfd (every GPU's)
            scanner = AmdDeviceHandles(smi.drm_minors, smi.kfd_node, config.proc_root, config.amd.sysfs_root,
                                       exempt=config.device_handles_exempt, owners=owners)
            handles = scanner.scan
            _warn_confined()
        real_amd = RealClock()
        clock_for = lambda _name: real_amd  # noqa: E731
    else:
        from dra_constructs.agent.backends.cuda import CudaScrubber
        from dra_constructs.agent.backends.nvml import NvmlDevices

        try:
            nvml = NvmlDevices()
        except BackendError as error:
            raise DraConstructsError("AgentConfig", "backend", "nvml", f"NVML unavailable: {error}",
                                     "run on a GPU node with the NVIDIA driver, or use backend: simulated") from error
        if not host_pid_namespace():
            _LOG.error("not in the host PID namespace: NVML's PIDs are host PIDs, so the agent signals nothing and "
                       "a device with processes left is quarantined (set hostPID: true)")
        from dra_constructs.agent.backends.partitions import NvmlPartitions

        partitions = NvmlPartitions(nvml)
        health = _nvml_health(nvml)
        from dra_constructs.agent.backends.ci_guard import NvmlComputeInstances

        ci_guard = NvmlComputeInstances(partitions)
        from dra_constructs.agent.backends.capability import reset_unavailable
        slots = worker_slots(config)
        if slots < config.max_parallel:
            _LOG.info("at most %d CUDA fill workers at once (memory limit; max_parallel %d)", slots,
                      config.max_parallel)
        scrubber = CudaScrubber(ptx_cache=str(config.state_path / "ptx"), max_workers=slots)
        signaller = host_signaller()
        owners = ProcOwners(config.proc_root)
        if config.device_handles:
            scanner = DeviceHandles(config.proc_root, exempt=config.device_handles_exempt, owners=owners)
            handles = scanner.scan
            _warn_confined()
        real = RealClock()
        clock_for = lambda _name: real  # noqa: E731
    kube: KubeClient | None = None
    if kube_ops is None and config.kube.mode != "disabled":
        kube = KubeClient(config.kube)
        kube_ops = kube
    version = config.kube.kubernetes_version
    if version is None and kube is not None:
        try:
            version = retrying(kube.server_version, RealClock(), config.kube.retries, config.kube.retry_backoff_s)
        except ApiError as error:
            raise DraConstructsError("AgentConfig", "kube", config.kube.mode, f"cannot reach the API: {error}",
                                     "check kube settings, or set kube.kubernetes_version") from error
    target = Target.parse(version, where="AgentConfig.kube.kubernetes_version")
    guard = Guard(kube_ops, target, config.node_name, key=config.taint_key, effect=config.taint_effect,
                  retries=config.kube.retries, backoff_s=config.kube.retry_backoff_s,
                  event_namespace=config.kube.event_namespace, driver=config.dra_driver)
    metrics = Metrics()
    scrub_off = nvml.scrub_on_free_disabled()
    metrics.scrub_on_free_disabled.set(-1 if scrub_off is None else int(scrub_off))
    if scrub_off:
        _LOG.warning("the driver's scrub-on-free is DISABLED on this node (RMDisableScrubOnFree): freed GPU "
                     "memory is not zeroed by the driver; the barrier's fill is the only scrub")
    store = StateStore(config.state_dir, fsync=fsync)
    stored = store.all()  # read once: nothing below writes a device state before _cut_off_resets reads them
    guard.lifecycle = Lifecycle(guard.event, seed_from_phases(stored),
                                count=lambda reason, outcome: metrics.lifecycle_events.labels(reason, outcome).inc())
    deps = BarrierDeps(
        config=config, nvml=nvml, scrubber=scrubber, signaller=signaller, guard=guard,
        store=store, evidence=EvidenceWriter(config.evidence_file, fsync=fsync),
        clock_for=clock_for, metrics=metrics, crash_hook=crash_hook, scrub_on_free_disabled=scrub_off,
        partitions=partitions, ci_guard=ci_guard, owners=owners, health=health, device_handles=handles,
        reset_unavailable=reset_unavailable if config.backend == "nvml" else (
            _amd_reset_unavailable if config.backend == "amd" else None),
    )
    if scanner is not None:  # a pod exemption needs the pod's namespace: the agent's pod list, once it has one
        scanner.pod_name = lambda uid: deps.pod_name(uid)
    try:
        enumeration = nvml.enumerate()
    except BackendError as error:
        raise DraConstructsError("node", "devices", config.backend, f"cannot enumerate devices: {error}",
                                 "check the driver and that the agent sees /dev/nvidia*") from error
    for failure in enumeration.errors:  # never skipped silently: the agent guards what these may hide
        _LOG.error("device enumeration failed for %s", failure)
    if config.dynamic_mig and config.backend == "nvml":
        enumeration = _with_placements(enumeration, partitions)
    if config.dynamic_mig:
        deps.mig_access = _mig_access(config, guard, metrics)
    deps.inventory.update({d.name: d for d in enumeration.devices})
    canary.apply_stored(deps, enumeration.devices)  # a residue verdict of an earlier start still holds
    devices = [*enumeration.devices, *_cut_off_resets(stored, deps.inventory)]
    _wire_overlaps(guard, deps.inventory, store)
    isolation = Isolation(kube_ops, target, config.node_name, inventory=deps.inventory, store=store,
                          event=guard.event, registry=metrics.registry, shared_taints=config.mig_isolation,
                          retries=config.kube.retries, backoff_s=config.kube.retry_backoff_s)
    isolation.served = lambda: guard.has_taints
    return Runtime(config, target, devices, Barrier(deps), guard, metrics, kube, node, enumeration, isolation)


def _warn_confined() -> None:
    """The device-handle scan reads other processes' fds: say so at start if an LSM confines the agent."""
    confined = lsm_confinement()
    if confined is not None:
        _LOG.warning("%s", confinement_warning(confined))


def _amd_reset_unavailable(_kind: str) -> str:
    """A claim's cold reset on AMD: never performed (the reset policy, :data:`..config.AMD_RESET`)."""
    from dra_constructs.agent.config import AMD_RESET

    return AMD_RESET


def _nvml_health(nvml: NvmlBackend) -> HealthSource | None:
    """The health reads over the agent's NVML; None (gates recorded as not run) if it cannot be set up."""
    from dra_constructs.agent.backends.nvml import NvmlDevices
    from dra_constructs.agent.backends.nvml_health import NvmlHealth

    if not isinstance(nvml, NvmlDevices):
        return None
    try:
        return NvmlHealth(nvml)
    except Exception as error:  # reported; every record then says the gates did not run
        _LOG.error("health reads unavailable (every record says the gates did not run): %s", error)
        return None


def _mig_access(config: AgentConfig, guard: Guard, metrics: Metrics) -> MigAccess:
    """DynamicMIG: check the MIG config capability once; a refusal is said once (log, Event, metric, readyz)."""
    metrics.mig_management_unavailable.set(0)

    def report(problem: str) -> None:
        metrics.mig_management_unavailable.set(1)
        guard.event("dynamic-mig", "MigManagementUnavailable",
                    f"the sanitizer cannot create or destroy MIG instances: {problem}; freed DynamicMIG placements "
                    "stay guarded until it can", RealClock())

    problem = check_mig_config() if config.backend == "nvml" else None
    return MigAccess(problem, report)


def _cut_off_resets(stored: list[DeviceState], inventory: dict[str, DeviceInfo]) -> list[DeviceInfo]:
    """Devices whose reset did not finish and that NVML no longer lists (instance destroyed): re-added.

    Killed between destroy and create (``resetting``): recovery recreates the instance at its
    placement and runs the whole barrier. Quarantined after a create the driver refused: it
    stays quarantined and an operator can still name it. Without this the slice would be
    forgotten: never recreated, never proven clean.
    """
    found = []
    for state in stored:
        cut_off = state.phase is Phase.RESETTING or (
            state.phase is Phase.QUARANTINED and state.reset is not None and state.reset.new_uuid is None)
        if not (cut_off or state.ci_guard is not None) or state.device in inventory:
            continue  # (a MIG slice whose compute instances are destroyed as a guard is not enumerated either)
        snapshot = state.reset.device if cut_off and state.reset is not None else (
            state.ci_guard.device if state.ci_guard is not None else None)
        if snapshot is None:
            _LOG.error("%s: cut off mid-reset, not enumerated, and no record of where it was: recreate the "
                       "MIG instance by hand; the agent sanitizes it when it appears", state.device)
            continue
        try:
            info = _device_from(snapshot)
        except (KeyError, TypeError, ValueError, IndexError) as error:
            _LOG.error("%s: cut off mid-reset, unreadable device record (%s): recreate the MIG instance by hand",
                       state.device, error)
            continue
        _LOG.warning("%s: cut off mid-reset and not enumerated (instance destroyed): recovering it", info.name)
        inventory[info.name] = info
        found.append(info)
    return found


def _wire_overlaps(guard: Guard, inventory: dict[str, DeviceInfo], store: StateStore) -> None:
    """DynamicMIG: the guard taints placements overlapping a held one (see :mod:`.guard`)."""

    def overlaps(name: str) -> list[str]:
        device = inventory.get(name)
        if device is None or not device.dynamic:
            return []
        return sorted(d.name for d in list(inventory.values()) if d.name != name and d.dynamic and d.overlaps(device))

    def held(name: str) -> bool:
        return store.load(name).phase is not Phase.CLEAN

    guard.overlaps, guard.held = overlaps, held


def _with_placements(enumeration: EnumerationResult, partitions: PartitionBackend | None) -> EnumerationResult:
    """DynamicMIG: every possible placement replaces the MIG instances that happen to exist now."""
    placements = getattr(partitions, "dynamic_devices", None)
    if placements is None:
        return enumeration
    try:
        dynamic = placements()
    except BackendError as error:
        raise DraConstructsError("AgentConfig", "dynamic_mig", True, f"cannot list MIG placements: {error}",
                                 "check the driver (nvmlDeviceGetGpuInstancePossiblePlacements), or set "
                                 "dynamic_mig: false") from error
    parents = {d.gpu_uuid for d in dynamic}
    kept = [d for d in enumeration.devices if d.gpu_uuid not in parents]  # MIG instances, and gpu-N when MIG is off
    return EnumerationResult([*kept, *dynamic], enumeration.errors)


def _device_from(snapshot: dict[str, Any]) -> DeviceInfo:
    """A :class:`DeviceInfo` from its ``dataclasses.asdict`` form (JSON turned tuples into lists)."""
    placement = snapshot.get("placement")
    return DeviceInfo(
        name=str(snapshot["name"]), uuid=str(snapshot["uuid"]), minor=int(snapshot["minor"]),
        memory_bytes=int(snapshot["memory_bytes"]), parent_uuid=snapshot.get("parent_uuid"),
        mig_profile=snapshot.get("mig_profile"),
        compute_instance_uuids=tuple(str(u) for u in snapshot.get("compute_instance_uuids") or ()),
        placement=(int(placement[0]), int(placement[1]), int(placement[2])) if placement else None,
        dynamic=bool(snapshot.get("dynamic", False)), whole_gpu=bool(snapshot.get("whole_gpu", False)),
    )
