"""DynamicMIG through the real NVML backend on the stand-in driver: orphans (r06), the whole GPU (r09),
MIG management (r13).

The stand-in answers as nvml.h documents: ``nvmlDeviceCreateGpuInstanceWithPlacement`` makes a GI
with no compute instance (no MIG device handle until ``nvmlGpuInstanceCreateComputeInstance``),
``nvmlGpuInstanceDestroy`` refuses while CIs exist, and ``INSUFFICIENT_RESOURCES`` over slices
another GI holds; its ``Node`` publishes the MIG config capability files the agent checks.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import pynvml

from dra_constructs.agent.kube import Tenant as ClaimTenant
from dra_constructs.agent.runtime import build_runtime
from dra_constructs.agent.state import Phase

from .standin import GI, GI_1_SLICE, GI_2_SLICE, GI_7_SLICE, GPU, NVML_ERROR_NO_PERMISSION, MiB, Node
from .test_standin_backends import MakeNode, a100_mig, agent_config, standin  # noqa: F401 - fixture

OWNER = ClaimTenant("team-a/c1", "team-a", "u1")
ONE_G = "gpu-0-mig-1g10gb-19-0"


def _placements(**first: Any) -> list[GI]:
    return [GI(1, [], GI_1_SLICE, profile_id=19, placement_start=0, present=False, **first),
            GI(2, [], GI_1_SLICE, profile_id=19, placement_start=1, present=False),
            GI(3, [], GI_2_SLICE, profile_id=14, slices=2, placement_start=0, placement_size=2, memory_mb=19968,
               present=False)]


def _h100(gis: list[GI]) -> GPU:
    return GPU("GPU-h", minor=0, name="NVIDIA H100 80GB HBM3", arch=90, mig=True, total=81920 * MiB, gis=gis)


def _gi(profile_id: int, start: int, size: int) -> Any:
    pynvml.nvmlInit()
    gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
    place = pynvml.c_nvmlGpuInstancePlacement_t()
    place.start, place.size = start, size
    return pynvml.nvmlDeviceCreateGpuInstanceWithPlacement(gpu, profile_id, ctypes.byref(place))


def _gis_present(node: Node) -> list[int]:
    path = node.state_dir / "layout"
    if not path.exists():
        return []
    return [int(p[2]) for p in (line.split() for line in path.read_text().splitlines()) if p[0] == "gi" and p[3] == "1"]


# --- r06: a failed CI create leaves no orphan; the agent's own CI-less GI is destroyed ------------

def test_failed_compute_instance_create_destroys_the_gpu_instance(standin: MakeNode, tmp_path: Path) -> None:  # noqa: F811
    node = standin([a100_mig("GPU-d", 0, _placements(error=999, error_call="nvmlGpuInstanceCreateComputeInstance"))])
    rt = build_runtime(agent_config(tmp_path, dynamic_mig=True), fsync=False)
    device = rt.barrier.deps.inventory[ONE_G]
    record = rt.barrier.run(device, "deallocated")
    assert record.result == "quarantined" and "nvmlGpuInstanceCreateComputeInstance" in (record.reason or "")
    assert _gis_present(node) == []  # no orphan GI holds the slices
    assert not rt.barrier.deps.store.load(ONE_G).transient_pending
    _gi(14, 0, 2)  # the driver can prepare the overlapping 2g placement


def test_own_gpu_instance_without_compute_instance_is_destroyed_and_released(standin: MakeNode,  # noqa: F811
                                                                              tmp_path: Path) -> None:
    node = standin([a100_mig("GPU-d", 0, _placements())])
    rt = build_runtime(agent_config(tmp_path, dynamic_mig=True), fsync=False)
    store = rt.barrier.deps.store
    state = store.load(ONE_G)
    state.phase, state.transient_pending = Phase.VERIFY_CONTEXTS, True  # killed between the GI and CI create
    store.save(state)
    _gi(19, 0, 1)
    assert _gis_present(node) == [0]
    record = rt.barrier.recover(rt.barrier.deps.inventory[ONE_G])
    assert record is not None and record.result == "released", record and record.reason
    assert _gis_present(node) == [] and store.load(ONE_G).phase is Phase.CLEAN


def test_foreign_gpu_instance_without_compute_instance_is_not_touched(standin: MakeNode,  # noqa: F811
                                                                       tmp_path: Path) -> None:
    node = standin([a100_mig("GPU-d", 0, _placements())])
    rt = build_runtime(agent_config(tmp_path, dynamic_mig=True), fsync=False)
    _gi(19, 0, 1)  # the DRA driver between its GI and CI create
    record = rt.barrier.run(rt.barrier.deps.inventory[ONE_G], "deallocated")
    assert record.result == "quarantined" and "did not create it" in (record.reason or "")
    assert _gis_present(node) == [0]


# --- r09: the whole GPU beside the placements (Hopper+) -------------------------------------------

def test_hopper_inventory_has_the_whole_gpu_and_ampere_does_not(standin: MakeNode, tmp_path: Path) -> None:  # noqa: F811
    seven = GI(4, [], GI_7_SLICE, profile_id=0, slices=7, placement_start=0, placement_size=8, memory_mb=81920,
               present=False)
    standin([_h100([*_placements(), seven])])
    rt = build_runtime(agent_config(tmp_path, dynamic_mig=True), fsync=False)
    whole = rt.barrier.deps.inventory["gpu-0"]
    assert whole.whole_gpu and whole.placement == (0, 0, 8) and whole.uuid == "GPU-h"
    assert set(rt.guard.overlaps("gpu-0")) == {ONE_G, "gpu-0-mig-1g10gb-19-1", "gpu-0-mig-2g20gb-14-0",
                                               "gpu-0-mig-7g80gb-0-0"}
    rt.barrier.mark_allocated(whole, OWNER)
    record = rt.barrier.run(whole, "deallocated", OWNER)  # MIG mode on: filled through the full-size GI
    assert record.result == "released", record.reason
    assert record.transient_instance is not None and record.coverage_of_free >= 0.99


def test_ampere_dynamic_mig_has_no_whole_gpu(standin: MakeNode, tmp_path: Path) -> None:  # noqa: F811
    standin([a100_mig("GPU-d", 0, _placements())])
    rt = build_runtime(agent_config(tmp_path, dynamic_mig=True), fsync=False)
    assert "gpu-0" not in rt.barrier.deps.inventory


# --- r13: the agent cannot manage MIG ------------------------------------------------------------

def test_without_the_mig_config_capability_placements_stay_guarded_and_nothing_is_created(
        standin: MakeNode, tmp_path: Path) -> None:  # noqa: F811
    node = standin([a100_mig("GPU-d", 0, _placements())], mig_config=False)
    rt = build_runtime(agent_config(tmp_path, dynamic_mig=True), fsync=False)
    access = rt.barrier.deps.mig_access
    assert access is not None and access.problem is not None and "mig/config" in access.problem
    assert rt.metrics.mig_management_unavailable._value.get() == 1
    for name in sorted(rt.barrier.deps.inventory):
        record = rt.barrier.run(rt.barrier.deps.inventory[name], "deallocated")
        assert record.result == "deferred" and "Insufficient Permissions" not in (record.reason or "")
        assert rt.barrier.deps.store.load(name).phase is Phase.QUARANTINED  # guarded, not released
    assert _gis_present(node) == []


def test_no_permission_from_nvml_is_said_once_and_defers(standin: MakeNode, tmp_path: Path) -> None:  # noqa: F811
    gis = [GI(1, [], GI_1_SLICE, profile_id=19, placement_start=s, present=False, error=NVML_ERROR_NO_PERMISSION,
              error_call="nvmlDeviceCreateGpuInstanceWithPlacement") for s in range(2)]
    standin([a100_mig("GPU-d", 0, gis)])
    rt = build_runtime(agent_config(tmp_path, dynamic_mig=True), fsync=False)
    access = rt.barrier.deps.mig_access
    assert access is not None and access.problem is None  # the capability files are there
    results = [rt.barrier.run(d, "deallocated").result for _, d in sorted(rt.barrier.deps.inventory.items())]
    assert results == ["deferred", "deferred"]
    assert access.problem is not None and "Insufficient Permissions" in access.problem


def test_driver_gpu_instance_appearing_before_the_create_is_never_taken_for_the_agents(
        standin: MakeNode, tmp_path: Path) -> None:  # noqa: F811
    """The driver's GI (its CI not made yet) appears between the agent's look and its create."""
    node = standin([a100_mig("GPU-d", 0, _placements())])

    def driver_prepares(device: str, point: str) -> None:
        if device == ONE_G and point == "transient-intent" and not _gis_present(node):
            _gi(19, 0, 1)

    rt = build_runtime(agent_config(tmp_path, dynamic_mig=True), crash_hook=driver_prepares, fsync=False)
    device = rt.barrier.deps.inventory[ONE_G]
    record = rt.barrier.run(device, "deallocated")
    assert record.result == "quarantined" and "Insufficient Resources" in (record.reason or "")
    assert not rt.barrier.deps.store.load(ONE_G).transient_pending  # not ours: never destroyed as ours
    again = rt.barrier.operator_release(device, "ticket", "ops")
    assert again.result == "quarantined" and "did not create it" in (again.reason or "")
    assert _gis_present(node) == [0]
