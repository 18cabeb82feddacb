"""Invalid pools and counter-set slices as ``buildPool`` reads them (issue 24, items 1 and 5).

Upstream ``structured/internal/incubating/pools_incubating.go`` (v0.35-v0.37): a pool whose
devices name a counter set no slice defines ("counter set X not found"), a counter the set
lacks ("counter X not found in counter set Y"), whose slices repeat a counter set ("duplicate
counter set name X") or a device name ("duplicate device name X") is invalid: none of its
devices is allocated (``if pool.IsIncomplete || pool.IsInvalid { continue }``), ``All`` fails
("asks for all devices, but resource pool P is currently invalid") and a failed allocation says
"invalid resource pools were encountered". With DRAPartitionableDevices on, a slice with
``sharedCounters`` is a counter-set slice: its devices are never offered.
"""

from __future__ import annotations

from typing import Any

import pytest

from dra_constructs.fit import Inventory

from .helpers import checked_fit, claim, only, request

GPU = "gpu.nvidia.com"


def counter_slice(name: str, *sets: tuple[str, dict[str, str]], pool: str = "n", count: int = 2,
                  devices: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": GPU, "nodeName": "n", "pool": {"name": pool, "generation": 1,
                                                                     "resourceSliceCount": count},
                            "sharedCounters": [{"name": s, "counters": {k: {"value": v} for k, v in c.items()}}
                                               for s, c in sets]}
    if devices is not None:
        spec["devices"] = devices
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def device(name: str, *consumes: tuple[str, dict[str, str]]) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "attributes": {"type": {"string": "gpu"}}}
    if consumes:
        body["consumesCounters"] = [{"counterSet": s, "counters": {k: {"value": v} for k, v in c.items()}}
                                    for s, c in consumes]
    return body


def device_slice(name: str, *devices: dict[str, Any], pool: str = "n", count: int = 2) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": {
        "driver": GPU, "nodeName": "n", "pool": {"name": pool, "generation": 1, "resourceSliceCount": count},
        "devices": list(devices)}}


ONE_GPU = claim("c", request("gpu", device_class=GPU))
ALL_GPUS = claim("c", request("gpu", device_class=GPU, allocationMode="All"))
GOOD = device("gpu-0", ("cs-0", {"memory": "1"}))


@pytest.mark.parametrize(("slices", "reason"), [
    ([counter_slice("a-counters", ("cs-0", {"memory": "1"})),
      device_slice("b-devices", GOOD, device("gpu-1", ("cs-missing", {"memory": "1"})))],
     "counter set cs-missing not found"),
    ([counter_slice("a-counters", ("cs-0", {"memory": "1"})),
      device_slice("b-devices", GOOD, device("gpu-1", ("cs-0", {"cores": "1"})))],
     "counter cores not found in counter set cs-0"),
    ([counter_slice("a-counters", ("cs-0", {"memory": "1"}), count=3),
      counter_slice("c-counters", ("cs-0", {"memory": "1"}), count=3), device_slice("b-devices", GOOD, count=3)],
     "duplicate counter set name cs-0"),
    ([counter_slice("a-counters", ("cs-0", {"memory": "1"}), count=3),
      device_slice("b-devices", GOOD, count=3), device_slice("c-devices", GOOD, count=3)],
     "duplicate device name gpu-0"),
])
def test_an_invalid_pool_gives_no_device(slices: list[dict[str, Any]], reason: str) -> None:
    result = only(checked_fit([ONE_GPU], Inventory.from_slices(slices)))
    assert not result.allocatable  # gpu-0 alone is fine, but its pool is invalid
    assert "invalid resource pools were encountered" in str(result.reason)
    assert f"pool {GPU}/n: {reason}" in str(result.reason)
    stopped = only(checked_fit([ALL_GPUS], Inventory.from_slices(slices)))
    assert f"asks for all devices, but resource pool {GPU}/n is currently invalid" in str(stopped.reason)


def test_another_pool_of_the_node_still_serves() -> None:
    slices = [counter_slice("a-counters", ("cs-0", {"memory": "1"})),
              device_slice("b-devices", device("gpu-1", ("cs-missing", {"memory": "1"}))),
              device_slice("other", device("gpu-9"), pool="other", count=1)]
    result = only(checked_fit([ONE_GPU], Inventory.from_slices(slices)))
    assert result.allocatable and [d.pool for d in result.devices] == ["other"]


def test_a_valid_split_pool_serves() -> None:
    slices = [counter_slice("a-counters", ("cs-0", {"memory": "1"})), device_slice("b-devices", GOOD)]
    assert only(checked_fit([ONE_GPU], Inventory.from_slices(slices))).allocatable


def test_without_partitionable_devices_counter_sets_are_not_validated() -> None:
    slices = [counter_slice("a-counters", ("cs-0", {"memory": "1"})),
              device_slice("b-devices", device("gpu-1"), device("gpu-2", ("cs-missing", {"memory": "1"})))]
    gates = {"DRAPartitionableDevices": False}
    result = only(checked_fit([ONE_GPU], Inventory.from_slices(slices), gates=gates))
    assert result.allocatable and [d.device for d in result.devices] == ["gpu-1"]


def test_up_to_1_34_a_missing_counter_set_does_not_invalidate_the_pool() -> None:
    # v0.34 poolIsInvalid checks device names only; counters sit beside the devices in one slice
    slices = [counter_slice("s", ("cs-0", {"memory": "1"}), count=1,
                            devices=[device("gpu-0", ("cs-0", {"memory": "1"}))])]
    gates = {"DRAPartitionableDevices": True}
    assert only(checked_fit([ONE_GPU], Inventory.from_slices(slices), "1.34", gates=gates)).allocatable


def test_the_1_34_combined_layout_read_at_1_35_plus_offers_no_device() -> None:
    slices = [counter_slice("s", ("cs-0", {"memory": "1"}), count=1,
                            devices=[device("gpu-0", ("cs-0", {"memory": "1"}))])]
    for version in ("1.35", "1.36", "1.37"):
        gates = {"DRAPartitionableDevices": True}
        result = only(checked_fit([ONE_GPU], Inventory.from_slices(slices), version, gates=gates))
        assert not result.allocatable, version
        assert "slice s has both sharedCounters and 1 device(s)" in str(result.reason)
        assert "publish the devices in a slice of their own" in str(result.reason)


def named_pool(pool: str, slice_name: str, device_name: str, **extra: Any) -> dict[str, Any]:
    return device_slice(slice_name, {**device(device_name), **extra}, pool=pool, count=1)


def test_from_1_36_pools_are_tried_by_name_and_slices_by_name() -> None:
    # sortPoolsByID / sortSlicesByName (pools_incubating.go, v0.36+); the inventory lists "b" first
    slices = [named_pool("b", "b-0", "gpu-b"), named_pool("a", "a-1", "gpu-a1")]
    second = device_slice("a-0", device("gpu-a0"), pool="a", count=2)
    slices[1]["spec"]["pool"]["resourceSliceCount"] = 2
    slices.append(second)
    first = only(checked_fit([ONE_GPU], Inventory.from_slices(slices), "1.36")).devices[0]
    assert (first.pool, first.device) == ("a", "gpu-a0")
    older = only(checked_fit([ONE_GPU], Inventory.from_slices(slices), "1.35")).devices[0]
    assert (older.pool, older.device) == ("b", "gpu-b")  # 1.35: Go map order, none defined: as listed


def test_from_1_36_pools_with_binding_conditions_come_last() -> None:
    slices = [named_pool("a", "a-0", "gpu-a", bindingConditions=["ready"]), named_pool("b", "b-0", "gpu-b")]
    gates = {"DRADeviceBindingConditions": True, "DRAResourceClaimDeviceStatus": True}
    first = only(checked_fit([ONE_GPU], Inventory.from_slices(slices), "1.36", gates=gates)).devices[0]
    assert (first.pool, first.device) == ("b", "gpu-b")
