"""The API server's per-slice limits of 1.35+ on inventories and on the catalog (issue 24, item 5).

The numbers are ``k8s.io/api/resource/v1/types.go`` (v0.35.0, v0.36.0, v0.37.0-beta.0):
``ResourceSliceMaxDevices`` 128, 64 once a device has taints or consumes counters,
``ResourceSliceMaxAttributesAndCapacitiesPerDevice`` 32,
``ResourceSliceMaxDeviceCounterConsumptionsPerDevice`` 2,
``ResourceSliceMaxCountersPerDeviceCounterConsumption`` 32, ``ResourceSliceMaxCounterSets`` 8,
``ResourceSliceMaxCountersPerCounterSet`` 32, ``DeviceTaintsMaxLength`` 16, and "Only one of
Devices and SharedCounters can be set in a ResourceSlice".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dra_constructs.catalog import catalog_resource_slices
from dra_constructs.cli import main
from dra_constructs.errors import DraConstructsError
from dra_constructs.fit.limits import check_slice_limits, slice_limit_problems
from dra_constructs.target import Target

from .test_cli import template


def a_slice(devices: int = 1, counter_sets: int = 0, counters: int = 1, **device: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": "gpu.nvidia.com", "nodeName": "n",
                            "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1}}
    if devices:
        spec["devices"] = [{"name": f"d{i}", **device} for i in range(devices)]
    if counter_sets:
        spec["sharedCounters"] = [{"name": f"cs-{i}", "counters": {f"c{j}": {"value": "1"} for j in range(counters)}}
                                  for i in range(counter_sets)]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "big"}, "spec": spec}


def attrs(n: int) -> dict[str, Any]:
    return {f"a{i}": {"int": i} for i in range(n)}


def consumes(sets: int, counters: int = 1) -> list[dict[str, Any]]:
    return [{"counterSet": f"cs-{i}", "counters": {f"c{j}": {"value": "1"} for j in range(counters)}}
            for i in range(sets)]


def taints(n: int) -> list[dict[str, Any]]:
    return [{"key": f"k{i}", "effect": "NoSchedule"} for i in range(n)]


@pytest.mark.parametrize(("at_limit", "over", "field", "limit"), [
    (a_slice(128), a_slice(129), "spec.devices", 128),
    (a_slice(64, taints=taints(1)), a_slice(65, taints=taints(1)), "spec.devices", 64),
    (a_slice(64, consumesCounters=consumes(1)), a_slice(65, consumesCounters=consumes(1)), "spec.devices", 64),
    (a_slice(attributes=attrs(16), capacity={f"m{i}": {"value": "1"} for i in range(16)}),
     a_slice(attributes=attrs(17), capacity={f"m{i}": {"value": "1"} for i in range(16)}),
     "spec.devices[d0].attributes+capacity", 32),
    (a_slice(consumesCounters=consumes(2)), a_slice(consumesCounters=consumes(3)), "spec.devices[d0].consumesCounters",
     2),
    (a_slice(consumesCounters=consumes(1, 32)), a_slice(consumesCounters=consumes(1, 33)),
     "spec.devices[d0].consumesCounters[cs-0].counters", 32),
    (a_slice(0, counter_sets=8), a_slice(0, counter_sets=9), "spec.sharedCounters", 8),
    (a_slice(0, counter_sets=1, counters=32), a_slice(0, counter_sets=1, counters=33),
     "spec.sharedCounters[cs-0].counters", 32),
    (a_slice(taints=taints(16)), a_slice(taints=taints(17)), "spec.devices[d0].taints", 16),
])
@pytest.mark.parametrize("version", ["1.35", "1.36", "1.37"])
def test_each_limit(version: str, at_limit: dict[str, Any], over: dict[str, Any], field: str, limit: int) -> None:
    target = Target.parse(version)
    check_slice_limits([at_limit], target)
    with pytest.raises(DraConstructsError) as info:
        check_slice_limits([over], target)
    message = str(info.value)
    assert "ResourceSlice/big" in message and field in message and f"at most {limit}" in message


def test_v1beta1_devices_are_read_under_basic() -> None:
    raw = a_slice(0)
    raw["spec"]["devices"] = [{"name": "d0", "basic": {"taints": taints(17)}}]
    with pytest.raises(DraConstructsError, match="taints"):
        check_slice_limits([raw], Target.parse("1.36"))


def test_the_combined_layout_is_refused_from_1_35() -> None:
    combined = a_slice(1, counter_sets=1)
    check_slice_limits([combined], Target.parse("1.34"))  # the 1.34 layout
    with pytest.raises(DraConstructsError, match="both devices and sharedCounters are set"):
        check_slice_limits([combined], Target.parse("1.37"))


def test_1_34_limits_are_not_the_1_35_ones() -> None:
    check_slice_limits([a_slice(129)], Target.parse("1.34"))  # not checked before 1.35


@pytest.mark.parametrize(("mode", "split"), [("static", False), ("dynamic", True)])
def test_the_catalog_keeps_every_limit(mode: str, split: bool) -> None:
    slices = catalog_resource_slices(mig_mode=mode, split_counter_sets=split, network=True)
    assert [(s["metadata"]["name"], slice_limit_problems(s)) for s in slices if slice_limit_problems(s)] == []


def test_the_catalog_cli_checks_what_it_emits(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "--resource-slices", "v1", "--mig-mode", "dynamic", "--separate-counter-slices"]) == 0
    # libyaml's parser (the same safe constructors): the whole catalog is ~1.8 MB of YAML, 2/3 of this test
    # with PyYAML's pure-Python one (docs/testing.md "Where the suite stands").
    docs = list(yaml.load_all(capsys.readouterr().out, Loader=yaml.CSafeLoader))
    assert docs and all(not slice_limit_problems(d) for d in docs)


def test_fit_refuses_an_inventory_over_a_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    slices = tmp_path / "slices.yaml"
    slices.write_text(yaml.safe_dump(a_slice(129)))
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump(template("a", "1g.10gb")))
    code = main(["fit", "--kubernetes-version", "1.36", "--slices", str(slices), str(pod)])
    err = capsys.readouterr().err
    assert code == 2 and "ResourceSlice/big" in err and "spec.devices" in err and "129" in err and "128" in err
    assert "Traceback" not in err
