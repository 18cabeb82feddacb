"""Existing shares (``--allocated`` results with ``shareID``) as the scheduler's allocated state has them.

Upstream ``foreachAllocatedDevice`` (``pkg/scheduler/framework/plugins/dynamicresources/
allocateddevices.go``): with DRAConsumableCapacity a ``shareID`` result is a share whose
``consumedCapacity`` adds to the device's ``AggregatedCapacity``; every other result is dedicated.
``checkAvailableCounters`` charges a device held by committed shares once, from 1.36.2
(``internal.IsDeviceAllocated``); 1.35 and 1.36.0-1 do not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dra_constructs.cli import main
from dra_constructs.errors import DraConstructsError
from dra_constructs.fit import MAX_COUNT, Inventory, fit
from dra_constructs.fit.allocator import SHARED_UNSHAREABLE
from dra_constructs.fit.inputs import collect
from dra_constructs.target import Target

from .helpers import checked_fit, claim, only, request

GPU = "gpu.nvidia.com"
ON = {"DRAConsumableCapacity": True, "DRAPartitionableDevices": True}


def gpu(name: str, multi: bool = True, memory: str | None = "8", counters: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "attributes": {"type": {"string": "gpu"}, "role": {"string": name}}}
    if multi:
        body["allowMultipleAllocations"] = True
    if memory is not None:
        body["capacity"] = {"memory": {"value": memory}}
    if counters is not None:
        body["consumesCounters"] = [{"counterSet": "board", "counters": {"slots": {"value": str(counters)}}}]
    return body


def slices(*devices: dict[str, Any], board: int | None = None) -> list[dict[str, Any]]:
    """One node; with ``board`` a counter-set slice (1.35+ layout) with ``slots: board``."""
    count = 2 if board is not None else 1
    pool = {"name": "n", "generation": 1, "resourceSliceCount": count}
    out: list[dict[str, Any]] = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                  "metadata": {"name": "devices"},
                                  "spec": {"driver": GPU, "nodeName": "n", "pool": pool, "devices": list(devices)}}]
    if board is not None:
        out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "counters"},
                    "spec": {"driver": GPU, "nodeName": "n", "pool": pool,
                             "sharedCounters": [{"name": "board", "counters": {"slots": {"value": str(board)}}}]}})
    return out


def result(device: str, share: str | None = None, consumed: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"request": "gpu", "driver": GPU, "pool": "n", "device": device}
    if share is not None:
        body["shareID"] = share
    if consumed is not None:
        body["consumedCapacity"] = consumed
    return body


def allocated_claim(name: str, *results: dict[str, Any]) -> dict[str, Any]:
    """A ResourceClaim as ``kubectl get resourceclaims -o yaml`` prints an allocated one."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "team"},
            "status": {"allocation": {"devices": {"results": list(results)}}}}


def want(memory: str | None = None, name: str = "new") -> Any:
    extra: dict[str, Any] = {"capacity": {"requests": {"memory": memory}}} if memory is not None else {}
    return claim(name, request("gpu", device_class="gpu.nvidia.com", **extra))


def fits(inventory: list[dict[str, Any]], claims: list[dict[str, Any]], memory: str | None = None,
         version: str = "1.37", gates: dict[str, bool] | None = None) -> Any:
    state = collect([], [], claims).allocated
    return only(checked_fit([want(memory)], Inventory.from_slices(inventory), version,
                            gates=ON if gates is None else gates, allocated=state))


ONLY_GPU_1 = "device.attributes['gpu.nvidia.com'].role == 'gpu-1'"
TWO_SHARES = [allocated_claim("a", result("gpu-0", "uid-a", {"memory": "3"})),
              allocated_claim("b", result("gpu-0", "uid-b", {"memory": "3"}))]


@pytest.mark.parametrize("version", ["1.35", "1.36", "1.37"])
def test_two_shares_of_three_leave_two(version: str) -> None:
    assert not fits(slices(gpu("gpu-0")), TWO_SHARES, "3", version).allocatable
    granted = fits(slices(gpu("gpu-0")), TWO_SHARES, "2", version)
    assert granted.allocatable and granted.devices[0].consumed == (("memory", 2),)


def test_shares_of_one_claim_sum_too() -> None:
    one = [allocated_claim("a", result("gpu-0", "uid-1", {"memory": "3"}), result("gpu-0", "uid-2", {"memory": "3"}))]
    assert not fits(slices(gpu("gpu-0")), one, "3").allocatable
    assert fits(slices(gpu("gpu-0")), one, "2").allocatable


def test_consumed_capacity_without_share_id_is_a_dedicated_result() -> None:
    """The scheduler reads ``shareID``, not ``consumedCapacity``: such a result takes the whole device."""
    dedicated = [allocated_claim("a", result("gpu-0", consumed={"memory": "1"}))]
    refused = fits(slices(gpu("gpu-0")), dedicated, "1")
    assert not refused.allocatable and "already allocated" in str(refused.reason)


def test_without_consumable_capacity_a_share_is_dedicated() -> None:
    """With DRAConsumableCapacity off ``foreachAllocatedDevice`` takes every result as dedicated."""
    share = [allocated_claim("a", result("gpu-0", "uid-a", {"memory": "1"}))]
    refused = fits(slices(gpu("gpu-0")), share, None, gates={"DRAConsumableCapacity": False})
    assert not refused.allocatable and "already allocated" in str(refused.reason)


def test_a_share_without_consumed_capacity_leaves_the_device_shareable() -> None:
    """A device without capacities: its share records none; the device stays open to more shares."""
    share = [allocated_claim("a", result("gpu-0", "uid-a"))]
    assert fits(slices(gpu("gpu-0", memory=None)), share).allocatable


@pytest.mark.parametrize(("version", "charged"), [("1.35", False), ("1.36.1", False), ("1.36.2", True),
                                                  ("1.36", True), ("1.37", True)])
def test_committed_shares_charge_counters_from_1_36_2(version: str, charged: bool) -> None:
    """Board of 8 slots; the shared device takes 4, the exclusive one 6: both together overdraw."""
    inventory = slices(gpu("gpu-0", counters=4), gpu("gpu-1", multi=False, memory=None, counters=6), board=8)
    share = [allocated_claim("a", result("gpu-0", "uid-a", {"memory": "3"}))]
    state = collect([], [], share).allocated
    other = claim("new", request("gpu", device_class="gpu.nvidia.com",
                                 selectors=[ONLY_GPU_1]))
    report = fit([other], Inventory.from_slices(inventory), target=Target.parse(version), gates=ON, allocated=state)
    assert only(report).allocatable is not charged


def test_several_shares_charge_the_counters_once() -> None:
    """Two shares of the device that takes 4 slots of 8: another device taking 4 still fits, 5 does not."""
    for slots, fits_too in ((4, True), (5, False)):
        inventory = slices(gpu("gpu-0", counters=4), gpu("gpu-1", multi=False, memory=None, counters=slots), board=8)
        other = claim("new", request("gpu", device_class="gpu.nvidia.com",
                                     selectors=[ONLY_GPU_1]))
        state = collect([], [], TWO_SHARES).allocated
        result_ = only(checked_fit([other], Inventory.from_slices(inventory), "1.37", gates=ON, allocated=state))
        assert result_.allocatable is fits_too, slots


def test_a_new_share_of_a_device_in_use_skips_the_counter_check() -> None:
    """``skipCounterCheck``: the shared device already charged its 4 slots; a third share is granted."""
    inventory = slices(gpu("gpu-0", counters=4), board=4)
    assert fits(inventory, TWO_SHARES, "2").allocatable


@pytest.mark.parametrize(("consumed", "field", "problem"), [
    ({"memory": "three"}, "consumedCapacity.memory", "not a Kubernetes quantity"),
    ({"memory": "-1"}, "consumedCapacity.memory", "cannot be negative"),
    ({"memory": ["3"]}, "consumedCapacity.memory", "not a Kubernetes quantity"),
    ("3Gi", "consumedCapacity", "maps capacity names to quantities"),
])
def test_bad_consumed_capacity_names_claim_field_and_value(consumed: Any, field: str, problem: str) -> None:
    with pytest.raises(DraConstructsError) as error:
        collect([], [], [allocated_claim("a", result("gpu-0", "uid-a"), result("gpu-0", "uid-b", consumed))])
    text = str(error.value)
    assert "ResourceClaim/team/a" in text and f"status.allocation.devices.results[1].{field}" in text
    shown = consumed["memory"] if isinstance(consumed, dict) else consumed
    assert problem in text and f"={shown!r}" in text


def test_bad_share_id_is_an_input_error() -> None:
    with pytest.raises(DraConstructsError, match=r"results\[0\]\.shareID"):
        collect([], [], [allocated_claim("a", result("gpu-0", ""))])


def test_a_share_of_an_unshared_device_counts_its_capacity_as_the_scheduler_does() -> None:
    """The scheduler keeps such a share out of ``AllocatedDevices`` (the device is not "in use") but
    ``CmpRequestOverCapacity`` adds its ``consumedCapacity``: an exclusive request (the whole
    capacity) no longer fits, and the reason says why."""
    share = [allocated_claim("a", result("gpu-0", "uid-a", {"memory": "3"}))]
    refused = fits(slices(gpu("gpu-0", multi=False)), share)
    assert not refused.allocatable and SHARED_UNSHAREABLE in str(refused.reason)
    # Without a recorded consumption nothing marks the device: the scheduler allocates it again.
    assert fits(slices(gpu("gpu-0", multi=False)), [allocated_claim("a", result("gpu-0", "uid-a"))]).allocatable


def test_counting_pods_records_shares() -> None:
    """``--count`` places Pods one after the other: each share is recorded as the scheduler records it."""
    report = fit([want("3")], Inventory.from_slices(slices(gpu("gpu-0"))), target=Target.parse("1.37"),
                 gates=ON, count=True)
    assert report.counts == {"n": 2}
    shareable = fit([want()], Inventory.from_slices(slices(gpu("gpu-0", memory=None))),
                    target=Target.parse("1.37"), gates=ON, count=True)
    assert shareable.counts == {"n": MAX_COUNT}  # before: 1, the share taken as dedicated


def test_cli_reads_shares_from_allocated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``fit --allocated`` with two shares of 3 on a capacity of 8: 3 exits 1 (does not fit), 2 exits 0;
    a bad ``consumedCapacity`` exits 2 naming the claim, the field and the value."""
    (tmp_path / "slices.yaml").write_text(yaml.safe_dump_all(slices(gpu("gpu-0"))))
    (tmp_path / "allocated.yaml").write_text(yaml.safe_dump_all(TWO_SHARES))
    for memory, code in (("3", 1), ("2", 0)):
        (tmp_path / "claim.yaml").write_text(yaml.safe_dump({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "new"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.nvidia.com", "capacity": {"requests": {"memory": memory}}}}]}}}))
        argv = ["fit", "--slices", str(tmp_path / "slices.yaml"), "--allocated", str(tmp_path / "allocated.yaml"),
                "--kubernetes-version", "1.37", str(tmp_path / "claim.yaml")]
        assert main(argv) == code, memory
    bad = [allocated_claim("a", result("gpu-0", "uid-a", {"memory": "3x"}))]
    (tmp_path / "allocated.yaml").write_text(yaml.safe_dump_all(bad))
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "ResourceClaim/team/a" in err and "results[0].consumedCapacity.memory='3x'" in err
