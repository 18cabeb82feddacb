"""Which pools a node may allocate from, as ``GatherPools`` / ``buildPool`` decide (1.35+).

A port of ``structured/internal/incubating/pools_incubating.go`` (v0.35-v0.37):

* with DRAPartitionableDevices on, a slice that has ``sharedCounters`` is a *counter-set slice*:
  its counter sets count for the whole pool and its ``devices`` are never offered (the API of
  1.35+ forbids both in one slice: "Only one of Devices and SharedCounters can be set"; a slice
  stored by 1.34 in the combined layout is read this way);
* from 1.36 pools are tried by driver and name (binding-condition pools last), slices by name;
* a pool is *invalid* - none of its devices is allocated, and a failed allocation says "invalid
  resource pools were encountered" - when (first reason wins, in upstream's order) two device
  slices for the node repeat a device name (``validateDeviceNames``), two counter-set slices
  repeat a counter set name (``getAndValidateCounterSets``), or a device names a counter set no
  slice of the pool defines or a counter its set lacks (``validateDeviceCounterConsumption``:
  devices for the node first, then the pool's other devices).

Up to 1.34 counter sets live beside the devices in one slice and only duplicate device names
make a pool invalid (``poolIsInvalid`` of v0.34).
"""

from __future__ import annotations

from collections.abc import Sequence

from dra_constructs.fit.model import Node, Pool, SliceInfo

__all__ = ["PoolIndex", "counter_set_slice", "invalid_reason", "node_pools"]


class PoolIndex:
    """The pools that may have slices for a node, in inventory order, without scanning them all.

    A slice with ``nodeName`` reaches only that node (``NodeMatches`` checks it first); pools
    with a slice for ``allNodes``, a ``nodeSelector`` or ``perDeviceNodeSelection`` are checked
    for every node. :func:`node_pools` decides, as before, from the candidates: on a fleet of
    5,000 nodes with a pool each, gathering is 1 + a few pools a node instead of 5,000.
    """

    def __init__(self, pools: Sequence[Pool]) -> None:
        self.pools = pools
        self.size = len(pools)
        self._named: dict[str, list[int]] = {}
        self._general: list[int] = []
        for position, pool in enumerate(pools):
            names: set[str] = set()
            general = False
            for slice_ in pool.slices:
                if slice_.selection.node_name is not None:
                    names.add(slice_.selection.node_name)
                elif slice_.selection.is_set or slice_.per_device:
                    general = True
            if general:
                self._general.append(position)
            else:
                for name in names:
                    self._named.setdefault(name, []).append(position)

    def fresh(self, pools: Sequence[Pool]) -> bool:
        """Whether the index still describes ``pools`` (the same list, no pool added or removed)."""
        return pools is self.pools and len(pools) == self.size

    def candidates(self, node: Node) -> list[Pool]:
        """The pools whose slices may target ``node``, in inventory order."""
        named = self._named.get(node.name, [])
        positions = sorted({*named, *self._general}) if self._general and named else named or self._general
        return [self.pools[p] for p in positions]


def node_pools(pools: Sequence[Pool], node: Node, partitionable: bool, split_layout: bool,
               sort: bool) -> list[tuple[Pool, list[SliceInfo]]]:
    """The pools with slices for ``node``, and those slices, in the allocator's order.

    Up to 1.34 a slice with ``perDeviceNodeSelection`` needs DRAPartitionableDevices; from 1.35
    one with ``sharedCounters`` too. ``sort`` (1.36+): pools by driver and name, those whose
    slices for the node have a device with binding conditions last, slices by name
    (``sortPoolsByID``, ``sortSlicesByName``); else the inventory's order.
    """
    found: list[tuple[Pool, list[SliceInfo]]] = []
    for pool in pools:
        slices = [s for s in pool.slices
                  if (partitionable or not (s.per_device or (split_layout and s.counter_set_names)))
                  and s.targets(node)]
        if slices:
            found.append((pool, sorted(slices, key=lambda s: s.name) if sort else slices))
    if sort:
        found.sort(key=lambda entry: (any(d.binding_conditions for s in entry[1] for d in s.devices),
                                      entry[0].driver, entry[0].name))
    return found


def counter_set_slice(slice_: SliceInfo, partitionable: bool, split_layout: bool) -> bool:
    """Whether ``slice_`` only contributes counter sets (its devices are not offered)."""
    return partitionable and split_layout and bool(slice_.counter_set_names)


def invalid_reason(pool: Pool, node_slices: Sequence[SliceInfo], partitionable: bool,
                   split_layout: bool) -> str | None:
    """Why ``pool`` is invalid for a node offered ``node_slices`` of it (``None``: valid)."""
    if not split_layout:
        return _duplicate_device(node_slices)
    device_slices = sorted((s for s in node_slices if not counter_set_slice(s, partitionable, split_layout)),
                           key=lambda s: s.name)
    duplicate = _duplicate_device(device_slices)
    if duplicate is not None or not partitionable:
        return duplicate
    counter_sets: dict[str, set[str]] = {}
    for slice_ in sorted(pool.slices, key=lambda s: s.name):
        if not counter_set_slice(slice_, partitionable, split_layout):
            continue
        for name in slice_.counter_set_names:
            if name in counter_sets:
                return f"duplicate counter set name {name}"
            counter_sets[name] = set(pool.counter_sets.get(name, {}))
    wanted = {id(s) for s in device_slices}
    others = sorted((s for s in pool.slices if id(s) not in wanted
                     and not counter_set_slice(s, partitionable, split_layout)), key=lambda s: s.name)
    for slice_ in [*device_slices, *others]:
        for device in slice_.devices:
            for set_name, counters in device.consumes:
                known = counter_sets.get(set_name)
                if known is None:
                    return f"counter set {set_name} not found"
                for counter, _ in counters:
                    if counter not in known:
                        return f"counter {counter} not found in counter set {set_name}"
    return None


def _duplicate_device(slices: Sequence[SliceInfo]) -> str | None:
    seen: set[str] = set()
    for slice_ in slices:
        for device in slice_.devices:
            if device.device.name in seen:
                return f"duplicate device name {device.device.name}"
            seen.add(device.device.name)
    return None
