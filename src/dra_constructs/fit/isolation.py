"""What ``exclusive-gpu`` MIG isolation costs in packing, measured with fit's allocator.

Pure core. :func:`pack` places tenants' MIG slice claims one after the other on one node, as the
scheduler does (each claim allocated by :class:`~dra_constructs.fit.Allocator` against the node's
ResourceSlices, its devices then in use), and between two claims applies the isolation taints
the sanitizer agent would place by then (:func:`dra_constructs.isolation.gpu_taint_value` on
every device of each GPU holding a slice, as DeviceTaintRules, read by
:meth:`~dra_constructs.fit.Inventory.from_slices`). Each claim carries its tenant's toleration
(:func:`~dra_constructs.isolation.tolerations_for`). The allocator decides every placement:
nothing here counts slots by formula. The taints land before the next claim is allocated: the
race the agent reports (two allocations before a taint) is not modelled, so the figures are the
policy's cost, not a race's.

Claims arrive round-robin (tenant 0's first slice, tenant 1's first, ..., tenant 0's second, ...),
the order that interleaves tenants most; ``shared-gpu`` with no taints is what the cluster does
today. ``benchmarks/isolation_cost.py`` runs it on the catalog's nodes; docs/tenants.md has the numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dra_constructs.fit.allocator import AllocatedState, Allocator
from dra_constructs.fit.inputs import collect, default_device_classes
from dra_constructs.fit.model import Inventory
from dra_constructs.isolation import ISOLATION_TAINT_KEY, IsolationLevel, gpu_taint_value, tolerations_for
from dra_constructs.target import Target

__all__ = ["PackingResult", "gpu_of", "pack"]


def gpu_of(device: str) -> str:
    """The physical GPU of an NVIDIA DRA device name (``gpu-3-mig-1g10gb-19-2`` -> ``gpu-3``)."""
    return device.split("-mig-", 1)[0]


@dataclass(frozen=True)
class PackingResult:
    """The outcome of one run of :func:`pack`."""

    level: IsolationLevel
    requested: int
    placed: int
    gpus_used: int
    tenants_served: int  # tenants that got every slice they asked for
    placements: tuple[tuple[str, str], ...] = ()  # (tenant, device) in allocation order

    @property
    def slices_per_gpu(self) -> float:
        return self.placed / self.gpus_used if self.gpus_used else 0.0


def _template(tenant: str, profile: str, level: IsolationLevel, taints: bool) -> dict[str, Any]:
    exactly: dict[str, Any] = {
        "deviceClassName": "mig.nvidia.com", "allocationMode": "ExactCount", "count": 1,
        "selectors": [{"cel": {"expression": f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"}}],
    }
    if taints:
        exactly["tolerations"] = tolerations_for(level, tenant)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "slice", "namespace": tenant},
            "spec": {"spec": {"devices": {"requests": [{"name": "mig", "exactly": exactly}]}}}}


def _rules(driver_pool: tuple[str, str], devices: Sequence[str], values: Mapping[str, str | None]
           ) -> list[dict[str, Any]]:
    """One DeviceTaintRule per device of each tainted GPU, as the agent's (``agent/isolation.py``)."""
    driver, pool = driver_pool
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
             "metadata": {"name": f"dra-isolation-{pool}-{name}"},
             "spec": {"deviceSelector": {"driver": driver, "pool": pool, "device": name},
                      "taint": {"key": ISOLATION_TAINT_KEY, "value": value, "effect": "NoSchedule"}}}
            for name in devices if (value := values.get(gpu_of(name))) is not None]


def pack(slices: Sequence[Mapping[str, Any]], node: str, profile: str, tenants: int, per_tenant: int,
         level: IsolationLevel, target: Target, *, taints: bool = True) -> PackingResult:
    """Place ``tenants`` x ``per_tenant`` single-slice claims of ``profile`` on ``node``, round-robin.

    ``taints``: apply the isolation taints (``False``: the cluster today, no isolation at all).
    """
    names = [f"tenant-{i:02d}" for i in range(tenants)]
    claims = {name: collect([_template(name, profile, level, taints)], []).claims[0] for name in names}
    node_slices = [s for s in slices if (s.get("spec") or {}).get("pool", {}).get("name") == node]
    driver = "gpu.nvidia.com"
    devices = [str(d["name"]) for s in node_slices if s["spec"].get("driver") == driver
               for d in s["spec"].get("devices") or []]
    classes, gates = default_device_classes(), target.default_feature_gates
    allocated = AllocatedState()
    holders: dict[str, dict[str, bool]] = {}  # GPU -> tenant -> exclusive
    got = dict.fromkeys(names, 0)
    placements: list[tuple[str, str]] = []
    for _ in range(per_tenant):
        for name in names:
            values = {gpu: gpu_taint_value(held, shared_taints=True) for gpu, held in holders.items()} if taints else {}
            inventory = Inventory.from_slices(node_slices, taint_rules=_rules((driver, node), devices, values))
            [where] = [n for n in inventory.nodes if n.name == node]
            result = Allocator(inventory, classes, gates, target, allocated).allocate([claims[name]], where)
            if not result.allocatable:
                continue
            got[name] += 1
            for device in result.devices:
                allocated.devices.add(device.id)
                placements.append((name, device.device))
                holders.setdefault(gpu_of(device.device), {})[name] = level == "exclusive-gpu"
    return PackingResult(level, tenants * per_tenant, sum(got.values()), len(holders),
                         sum(1 for n in got.values() if n == per_tenant), tuple(placements))
