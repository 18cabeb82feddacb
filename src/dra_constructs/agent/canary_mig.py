"""The residue canary's DynamicMIG variant: GPU instance destroy and recreate over the same memory slices.

A DynamicMIG tenant's release is its process exit *and* the destroy of its GPU instance (GI);
the next claim's instance is a new GI over the same memory slices. No public source says whether
the driver scrubs a GI's memory at destroy or create (nvml.h documents ``nvmlGpuInstanceDestroy``
only as "Destroy GPU instance", with ``IN_USE`` while processes or compute instances are active;
go-nvml ``pkg/nvml/nvml.h`` at 2f9e261, lines 13024-13038). So the canary does what a tenant's
release does and looks:

1. create a GI and its compute instances at the placement (:meth:`PartitionBackend.create`:
   ``nvmlDeviceCreateGpuInstanceWithPlacement``, line 13016, then
   ``nvmlGpuInstanceCreateComputeInstanceWithPlacement``, line 13270);
2. a CUDA worker writes the random pattern into nearly all its free memory and exits without
   freeing (as a tenant does);
3. destroy the compute instances and the GI (``nvmlComputeInstanceDestroy``, line 13291;
   ``nvmlGpuInstanceDestroy``, line 13038);
4. create a fresh GI and compute instances at the same placement (same memory slices), and a
   fresh worker there reads nearly all free memory: pattern words are residue that survived the
   GI destroy and recreate (and the process exit);
5. the fresh worker zero-fills and verifies (the barrier's own check,
   :func:`.barrier.check_verify`), then the GI is destroyed: the placement is left as it was found,
   with no instance.

Crash safety as the barrier's transient instance: ``transient_pending`` is saved (durable)
before each create and the UUID right after it, so a crash mid-canary leaves a state in ``guard``
whose recovery (the whole barrier) finds the instance as the agent's own and destroys it at the
release. The canary holds the GPU's node-wide lock (:mod:`.gpulock`) like a barrier: no other
placement of the GPU is sanitized meanwhile.

Only on demand (``dra-sanitizer selftest``), never at the agent's start: the GPU kubelet plugin
destroys, when it starts, instances it did not create, and prepares claims at any time; a GI
create that races it would read as inconclusive and switch the node's regime for nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from dra_constructs.agent.backends.base import BackendError
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.evidence import EvidenceRecord
from dra_constructs.agent.gpulock import GpuLocks
from dra_constructs.agent.state import DeviceState, Phase

if TYPE_CHECKING:
    from dra_constructs.agent.barrier import BarrierDeps

__all__ = ["GI_RECREATE", "gi_cycle", "gpu_lock", "why_not"]

#: Suffix of the GPU model in a DynamicMIG canary's verdict key: its release path differs from a
#: whole GPU's (process exit + GI destroy/recreate), so its verdict is kept apart.
GI_RECREATE = " [MIG GI recreate]"


@contextlib.contextmanager
def gpu_lock(deps: BarrierDeps, device: DeviceInfo) -> Iterator[None]:
    """The DynamicMIG per-GPU lock (before the device's lock, as everywhere); nothing for other devices."""
    if not device.dynamic:
        yield
        return
    with GpuLocks(deps.store.root / "locks").get(device.gpu_uuid):
        yield


def why_not(deps: BarrierDeps, device: DeviceInfo, claimed: Callable[[str], bool], state: DeviceState,
            sanitized: bool) -> str | None:
    """Why the DynamicMIG canary may not use the placement ``device`` (None: it may)."""
    parts = deps.partitions
    if not sanitized:
        return "a DynamicMIG placement: its canary (GI destroy + recreate) runs on demand only (dra-sanitizer selftest)"
    if parts is None:
        return "a DynamicMIG placement and this backend cannot create MIG instances"
    if device.whole_gpu:
        return "the whole GPU of a DynamicMIG GPU (the canary runs on a placement)"
    if deps.mig_access is not None and deps.mig_access.problem is not None:
        return f"the agent cannot manage MIG: {deps.mig_access.problem}"
    if claimed(device.name):
        return "claimed"
    used = bool(state.claim_uids) and state.verified_cycle != state.cycle
    if state.phase is not Phase.CLEAN or state.claim or used or state.transient_uuid or state.transient_pending:
        return f"not clean and unclaimed (phase {state.phase.value})"
    mig_enabled = getattr(parts, "mig_enabled", None)
    gi_exists: Callable[[DeviceInfo], bool] = getattr(parts, "gpu_instance_exists", lambda _d: False)
    try:
        if mig_enabled is not None and not mig_enabled(device):
            return "MIG mode is off on its GPU"
        if parts.instance(device) is not None or gi_exists(device):
            return "an instance exists at the placement (a claim's, or the DRA driver's)"
        for name in deps.guard.overlaps(device.name):
            other = deps.inventory.get(name)
            if other is None or other.whole_gpu:
                continue
            if deps.store.load(other.name, other.uuid).phase is Phase.ALLOCATED:
                return f"the overlapping placement {name} is held by a claim"
            if gi_exists(other):
                return f"an instance exists at the overlapping placement {name}"
    except BackendError as error:
        return f"NVML cannot tell what is at the placement: {error}"
    return None


def _create(deps: BarrierDeps, device: DeviceInfo, state: DeviceState) -> DeviceInfo:
    """A GI + CIs at the placement; the intent saved before, the UUID right after (crash safety)."""
    assert deps.partitions is not None
    state.transient_pending = True
    deps.store.save(state)
    instance = deps.partitions.create(device)
    state.transient_uuid, state.transient_pending = instance.uuid, False
    deps.store.save(state)
    return instance


def _destroy(deps: BarrierDeps, instance: DeviceInfo, state: DeviceState) -> None:
    assert deps.partitions is not None
    deps.partitions.destroy(instance)
    state.transient_uuid = None
    deps.store.save(state)


def gi_cycle(deps: BarrierDeps, device: DeviceInfo, pattern: int, record: EvidenceRecord,
             state: DeviceState) -> tuple[int, tuple[int, int, int, str | None]]:
    """(bytes written, (bytes read, pattern words, other non-zero words, cleanup problem or None))."""
    from dra_constructs.agent.canary import _read, _write

    first = _create(deps, device, state)
    written = _write(deps, first, pattern)  # the worker exited: its memory freed as a tenant's
    _destroy(deps, first, state)
    second = _create(deps, device, state)  # a fresh GI over the same memory slices
    record.transient_instance = second.uuid
    record.warnings.append(f"DynamicMIG canary: pattern written in GPU instance {first.uuid}, destroyed; read in a "
                           f"fresh one at the same placement ({second.uuid})")
    read, found, other, cleanup = _read(deps, second, pattern, record)
    try:
        _destroy(deps, second, state)
    except BackendError as error:  # the recovery's barrier destroys it (transient_uuid is saved)
        cleanup = cleanup or f"destroying the canary's GPU instance failed: {error}"
    return written, (read, found, other, cleanup)
