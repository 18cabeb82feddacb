"""The API server's per-slice limits of 1.35+ (``k8s.io/api/resource/v1/types.go``).

Checked on every inventory ``fit`` reads and on what ``dra-constructs catalog`` emits, so that
neither a slice the API server would reject nor a result computed from one gets through. The
numbers are the constants (and field comments) of ``types.go``, identical in v0.35.0, v0.36.0
and v0.37.0-beta.0 for ``v1``, ``v1beta2`` and ``v1beta1``:

* ``ResourceSliceMaxDevices`` 128, ``ResourceSliceMaxDevicesWithTaintsOrConsumesCounters``
  (1.35; ``...WithAdvancedFeatures`` from 1.36) 64 once a device has taints or consumes counters;
* ``ResourceSliceMaxAttributesAndCapacitiesPerDevice`` 32;
* ``ResourceSliceMaxDeviceCounterConsumptionsPerDevice`` 2 and
  ``ResourceSliceMaxCountersPerDeviceCounterConsumption`` 32;
* ``ResourceSliceMaxCounterSets`` 8 and ``ResourceSliceMaxCountersPerCounterSet`` 32;
* ``DeviceTaintsMaxLength`` 16;
* "Only one of Devices and SharedCounters can be set in a ResourceSlice" (the 1.34 combined
  layout is rejected from 1.35).

1.34 had other limits (4 taints a device, 1,024 counters consumed a slice, 32 counters in all
sets of a slice); they are not checked. 1.35+ has no per-slice total of consumed counters.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dra_constructs.errors import DraConstructsError
from dra_constructs.target import Target

__all__ = ["LIMITS", "check_slice_limits", "slice_limit_problems"]

LIMITS = {
    "devices": 128,
    "devices_with_taints_or_counters": 64,
    "attributes_and_capacities": 32,
    "counter_consumptions": 2,
    "counters_per_consumption": 32,
    "counter_sets": 8,
    "counters_per_set": 32,
    "taints": 16,
}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def slice_limit_problems(raw: Mapping[str, Any]) -> list[tuple[str, int, int, str]]:
    """``(field, value, limit, fix)`` for every 1.35+ limit one ResourceSlice passes."""
    spec = _dict(raw.get("spec"))
    devices = [_dict(d) for d in _list(spec.get("devices"))]
    counter_sets = [_dict(c) for c in _list(spec.get("sharedCounters"))]
    found: list[tuple[str, int, int, str]] = []
    if devices and counter_sets:
        found.append(("spec.sharedCounters", len(counter_sets), 0,
                      "from 1.35 a slice holds devices or sharedCounters, not both: publish the counter sets in a "
                      "slice of their own in the same pool (the allocator offers no device of such a slice)"))
    if len(counter_sets) > LIMITS["counter_sets"]:
        found.append(("spec.sharedCounters", len(counter_sets), LIMITS["counter_sets"],
                      "split the counter sets over more slices of the pool"))
    for counter_set in counter_sets:
        counters = _dict(counter_set.get("counters"))
        if len(counters) > LIMITS["counters_per_set"]:
            found.append((f"spec.sharedCounters[{counter_set.get('name')}].counters", len(counters),
                          LIMITS["counters_per_set"], "split the counters over more counter sets"))
    advanced = False
    for device in devices:
        body = _dict(device.get("basic")) or device  # v1beta1 nests the fields under basic
        name = device.get("name")
        entries = len(_dict(body.get("attributes"))) + len(_dict(body.get("capacity")))
        if entries > LIMITS["attributes_and_capacities"]:
            found.append((f"spec.devices[{name}].attributes+capacity", entries, LIMITS["attributes_and_capacities"],
                          "publish at most 32 attributes and capacities per device"))
        consumes = [_dict(c) for c in _list(body.get("consumesCounters"))]
        if len(consumes) > LIMITS["counter_consumptions"]:
            found.append((f"spec.devices[{name}].consumesCounters", len(consumes), LIMITS["counter_consumptions"],
                          "consume from at most 2 counter sets per device"))
        for consumption in consumes:
            counters = _dict(consumption.get("counters"))
            if len(counters) > LIMITS["counters_per_consumption"]:
                found.append((f"spec.devices[{name}].consumesCounters[{consumption.get('counterSet')}].counters",
                              len(counters), LIMITS["counters_per_consumption"],
                              "consume at most 32 counters of one counter set"))
        taints = _list(body.get("taints"))
        if len(taints) > LIMITS["taints"]:
            found.append((f"spec.devices[{name}].taints", len(taints), LIMITS["taints"],
                          "put at most 16 taints on a device (or use a DeviceTaintRule)"))
        advanced = advanced or bool(consumes) or bool(taints)
    limit = LIMITS["devices_with_taints_or_counters"] if advanced else LIMITS["devices"]
    if len(devices) > limit:
        why = " (a device has taints or consumes counters)" if advanced else ""
        found.append(("spec.devices", len(devices), limit,
                      f"publish at most {limit} devices per slice{why}: split the pool over more slices"))
    return found


def check_slice_limits(slices: Iterable[Mapping[str, Any]], target: Target) -> None:
    """Raise :class:`DraConstructsError` for the first slice over a limit of ``target`` (1.35+)."""
    if target.minor < 35:
        return
    for index, raw in enumerate(slices):
        problems = slice_limit_problems(raw)
        if problems:
            field_name, value, limit, fix = problems[0]
            name = _dict(raw.get("metadata")).get("name") or f"slices[{index}]"
            what = ("both devices and sharedCounters are set" if limit == 0
                    else f"{value} entries, the API server of {target} allows at most {limit}")
            raise DraConstructsError(f"ResourceSlice/{name}", field_name, value, what, fix)
