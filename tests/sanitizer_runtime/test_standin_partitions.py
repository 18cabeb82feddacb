"""Cold partition reset and the DynamicMIG transient instance through the real NVML backend (item 11, 12).

The stand-in ``libnvidia-ml.so.1`` implements the GPU-instance / compute-instance calls that
``NvmlPartitions`` makes through pynvml (``nvmlDeviceGetGpuInstances``,
``nvmlDeviceGetGpuInstanceProfileInfoByIdV``, ``nvmlDeviceGetGpuInstancePossiblePlacements_v2``,
``nvmlDeviceCreateGpuInstanceWithPlacement``, ``nvmlGpuInstanceGetComputeInstanceProfileInfoV``,
``nvmlGpuInstanceGetComputeInstances``, ``nvmlComputeInstanceGetInfo_v2``,
``nvmlGpuInstanceCreateComputeInstance(WithPlacement)``, ``nvmlComputeInstanceDestroy``,
``nvmlGpuInstanceDestroy``) with nvml.h's structs and return codes (``IN_USE`` while a process
holds the instance, ``INSUFFICIENT_RESOURCES`` over slices another instance holds). The GI's
memory survives destroy/create, so what the previous tenant wrote is still there: only the
barrier's fill removes it.
"""

from __future__ import annotations

import ctypes
import json
import struct
from pathlib import Path
from typing import Any

import pynvml
import pytest

from dra_constructs.agent.agent import Agent
from dra_constructs.agent.backends.simulated import SimulatedCrash
from dra_constructs.agent.clock import VirtualClock
from dra_constructs.agent.kube import Tenant as ClaimTenant
from dra_constructs.agent.runtime import build_runtime
from dra_constructs.agent.state import Phase

from .standin import CI, GI, GI_1_SLICE, GI_2_SLICE, MiB, Node, Tenant
from .test_standin_backends import MakeNode, a100_mig, agent_config, standin  # noqa: F401 - fixture

PATTERN = 0xA5C35A3C
MARK = struct.pack("<I", PATTERN)
OWNER = ClaimTenant("team-a/c1", "team-a", "u1")


def _two_ci_node(standin: MakeNode, generation: str = "570", **gi: Any) -> Node:  # noqa: F811
    """One 2g GPU instance at placement 0 with two 1-slice compute instances (CI 0, CI 1)."""
    slot = GI(1, [CI("MIG-old-ci0", id=0, placement_start=0), CI("MIG-old-ci1", id=1, placement_start=1)],
              GI_2_SLICE, profile_id=14, slices=2, placement_start=0, placement_size=2, memory_mb=19968, **gi)
    return standin([a100_mig("GPU-m", 0, [slot])], generation=generation)


def test_mig_instance_reset_recreates_the_layout_rekeys_and_zeroes(standin: MakeNode,  # noqa: F811
                                                                    tmp_path: Path) -> None:
    node = _two_ci_node(standin)
    rt = build_runtime(agent_config(tmp_path, partition_reset="mig-instance"), fsync=False)
    device = rt.devices[0]
    assert device.compute_instance_uuids == ("MIG-old-ci0", "MIG-old-ci1")
    assert rt.barrier.run(device, "startup-unknown").result == "released"
    rt.barrier.mark_allocated(device, OWNER)
    tenant = Tenant(node, "MIG-old-ci1", nbytes=8 * MiB, pattern=PATTERN, ignore_term=True)  # on the 2nd CI
    try:
        record = rt.barrier.run(device, "deallocated", OWNER)
    finally:
        tenant.stop()
    assert record.result == "released", record.reason
    assert tenant.pid in record.pids_sigkill
    assert record.reset_type == "mig-instance" and record.reset_old_uuid == "MIG-old-ci0"
    new = node.layout()[0]
    assert len(new) == 2 and not {"MIG-old-ci0", "MIG-old-ci1"} & set(new)  # same layout, new UUIDs
    assert record.reset_new_uuid == new[0] == record.uuid
    assert rt.barrier.deps.inventory[device.name].compute_instance_uuids == tuple(new)
    assert rt.barrier.deps.store.load(device.name).uuid == new[0]
    assert MARK not in node.memory(0, 0)  # the tenant's bytes survived the reset; the fill did not
    assert record.bytes_verified > 0 and record.coverage_of_free >= 0.99 and record.nonzero_words == 0
    assert [node.compute_mode(u) for u in new] == [0, 0]  # DEFAULT again on every recreated CI


@pytest.mark.parametrize(("generation", "modes"), [("13.3", [2, 2]), ("570", [0, 0])])
def test_mig_instance_reset_refused_in_use_quarantines(standin: MakeNode, tmp_path: Path,  # noqa: F811
                                                       generation: str, modes: list[int]) -> None:
    """A process NVML does not list holds the instance: destroy answers IN_USE, the slice is quarantined.

    CUDA 13.3: PROHIBITED on each CI. R570: no compute mode on MIG, and the compute-instance guard is
    refused too (IN_USE): the evidence says it cannot be guarded locally.
    """
    node = _two_ci_node(standin, generation, unlisted_used=4 * MiB)
    rt = build_runtime(agent_config(tmp_path, partition_reset="mig-instance"), fsync=False)
    device = rt.devices[0]
    rt.barrier.mark_allocated(device, OWNER)
    record = rt.barrier.run(device, "deallocated", OWNER)
    assert record.result == "quarantined"
    assert record.reason is not None and "nvmlComputeInstanceDestroy" in record.reason
    assert "In use by another client" in record.reason
    assert rt.barrier.deps.store.load(device.name).phase is Phase.QUARANTINED
    assert node.layout()[0] == ["MIG-old-ci0", "MIG-old-ci1"]  # nothing destroyed
    assert [node.compute_mode(u) for u in node.layout()[0]] == modes  # PROHIBITED where NVML can set it
    assert record.compute_mode_guard is (generation == "13.3")
    if generation == "570":
        assert record.compute_instance_guard is False
        assert any("not guarded locally" in w for w in record.warnings), record.warnings


def _dynamic_node(standin: MakeNode, residue: bool = True) -> Node:  # noqa: F811
    """DynamicMIG: possible placements only (1g at 0 and 1, 2g at 0), no instance exists."""
    gis = [GI(1, [], GI_1_SLICE, profile_id=19, placement_start=0, present=False),
           GI(2, [], GI_1_SLICE, profile_id=19, placement_start=1, present=False),
           GI(3, [], GI_2_SLICE, profile_id=14, slices=2, placement_start=0, placement_size=2, memory_mb=19968,
              present=False)]
    return standin([a100_mig("GPU-d", 0, gis)], residue_byte=0x5A if residue else None)


def _driver_prepare(profile_id: int, start: int, size: int) -> Any:
    """What the DRA driver does at prepare in DynamicMIG mode: a GI at the placement, one full CI."""
    pynvml.nvmlInit()
    gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
    place = pynvml.c_nvmlGpuInstancePlacement_t()
    place.start, place.size = start, size
    gi = pynvml.nvmlDeviceCreateGpuInstanceWithPlacement(gpu, profile_id, ctypes.byref(place))
    full = pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, size - 1, 0)  # 1 -> 1_SLICE, 2 -> 2_SLICE
    ci = pynvml.nvmlGpuInstanceCreateComputeInstance(gi, full.id)
    return gi, ci


def _driver_unprepare(gi: Any, ci: Any) -> None:
    pynvml.nvmlComputeInstanceDestroy(ci)
    pynvml.nvmlGpuInstanceDestroy(gi)


def test_dynamic_mig_transient_instance_zeroes_what_the_tenant_left(standin: MakeNode,  # noqa: F811
                                                                     tmp_path: Path) -> None:
    node = _dynamic_node(standin, residue=False)
    rt = build_runtime(agent_config(tmp_path, dynamic_mig=True), fsync=False)
    by_name = {d.name: d for d in rt.devices}
    assert sorted(by_name) == ["gpu-0-mig-1g10gb-19-0", "gpu-0-mig-1g10gb-19-1", "gpu-0-mig-2g20gb-14-0"]
    device = by_name["gpu-0-mig-1g10gb-19-0"]
    rt.barrier.mark_allocated(device, OWNER)
    gi, ci = _driver_prepare(19, 0, 1)
    (uuid,) = node.layout()[0]
    tenant = Tenant(node, uuid, nbytes=8 * MiB, pattern=PATTERN, hold=False)  # writes, exits
    assert not tenant.alive() and MARK in node.memory(0, 0)
    _driver_unprepare(gi, ci)
    assert node.layout() == {}
    record = rt.barrier.run(device, "deallocated", OWNER)
    assert record.result == "released", record.reason
    assert record.transient_instance is not None and record.transient_instance != uuid
    assert record.bytes_verified > 0 and record.coverage_of_free >= 0.99 and record.nonzero_words == 0
    assert MARK not in node.memory(0, 0)
    assert node.layout() == {}  # the transient instance is gone again: the driver creates its own
    state = rt.barrier.deps.store.load(device.name)
    assert state.phase is Phase.CLEAN and state.transient_uuid is None


def test_dynamic_mig_overlapping_instance_refuses_the_transient_and_quarantines(standin: MakeNode,  # noqa: F811
                                                                                tmp_path: Path) -> None:
    """The 2g placement over the freed 1g slices exists: the transient is INSUFFICIENT_RESOURCES."""
    node = _dynamic_node(standin)
    rt = build_runtime(agent_config(tmp_path, dynamic_mig=True), fsync=False)
    device = {d.name: d for d in rt.devices}["gpu-0-mig-1g10gb-19-0"]
    rt.barrier.mark_allocated(device, OWNER)
    _driver_prepare(14, 0, 2)  # another claim's instance over the same memory slices
    record = rt.barrier.run(device, "deallocated", OWNER)
    assert record.result == "quarantined"
    assert record.reason is not None and "Insufficient Resources" in record.reason
    assert rt.barrier.deps.store.load(device.name).phase is Phase.QUARANTINED
    assert list(node.layout()) == [2]  # the other claim's instance is untouched


def test_crash_after_the_instance_was_destroyed_is_recovered(standin: MakeNode, tmp_path: Path) -> None:  # noqa: F811
    """Killed between destroy and create: the restarted agent cannot enumerate the slice any more.

    The state file says ``resetting``; the agent must recreate the instance at its placement and
    sanitize it, not forget the device (it would never be recreated or proven clean).
    """
    node = _two_ci_node(standin, reserved=2 * MiB)

    def crash(_device: str, point: str) -> None:
        if point == "reset-destroyed":
            raise SimulatedCrash(point)

    config = agent_config(tmp_path, partition_reset="mig-instance")
    rt = build_runtime(config, crash_hook=crash, fsync=False)
    device = rt.devices[0]
    rt.barrier.mark_allocated(device, OWNER)
    with pytest.raises(SimulatedCrash):
        rt.barrier.run(device, "deallocated", OWNER)
    assert node.layout() == {}  # the instance is gone
    restarted = build_runtime(config, fsync=False)
    assert device.name in restarted.barrier.deps.inventory
    agent = Agent(restarted, clock=VirtualClock())
    assert agent.initial_list()
    agent.startup()
    agent.wait()
    state = restarted.barrier.deps.store.load(device.name)
    assert state.phase is Phase.CLEAN, state.reason
    (new,) = node.layout().values()
    assert state.uuid == new[0] and "MIG-old-ci0" not in new
    record = json.loads((tmp_path / "evidence.jsonl").read_text().splitlines()[-1])
    assert record["result"] == "released" and record["reset_old_uuid"] == "MIG-old-ci0"
    assert record["reset_new_uuid"] == new[0]


def test_reset_that_cannot_recreate_quarantines_and_the_slice_is_not_forgotten(standin: MakeNode,  # noqa: F811
                                                                                tmp_path: Path) -> None:
    """Destroyed, then create answers INSUFFICIENT_RESOURCES: quarantined; after a restart still known."""
    node = _two_ci_node(standin, error=23, error_call="nvmlDeviceCreateGpuInstanceWithPlacement")
    config = agent_config(tmp_path, partition_reset="mig-instance")
    rt = build_runtime(config, fsync=False)
    device = rt.devices[0]
    rt.barrier.mark_allocated(device, OWNER)
    record = rt.barrier.run(device, "deallocated", OWNER)
    assert record.result == "quarantined" and "Insufficient Resources" in (record.reason or "")
    assert node.layout() == {}
    restarted = build_runtime(config, fsync=False)
    assert restarted.device(device.name).name == device.name  # an operator can still name it
    assert restarted.barrier.recover(restarted.barrier.deps.inventory[device.name]) is None
    assert restarted.barrier.deps.store.load(device.name).phase is Phase.QUARANTINED
