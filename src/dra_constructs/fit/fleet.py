"""Solve each kind of node once: a fleet of identical nodes is one allocation problem.

Two nodes are *equivalent* for one :func:`~dra_constructs.fit.fit` call when the allocator
cannot tell them apart: the pools it gathers for them (``fit/pools.py``: node selection per slice
and per device, the allocator's pool and slice order) hold, position by position, the same
devices - same names, driver, the values the claims' CEL selectors read (their footprints,
``cel/_footprint.py``; every attribute and capacity where a footprint is not narrower), the
attributes the claims' constraints compare, capacities and request policies, counters consumed,
taints, binding conditions, shared-device flag, allocated state (``--allocated``) - and the same
counter sets, pool generations and slice counts. Only names differ: the node's, its pools' and
its slices' (whose relative order is part of the key, as the allocator sorts by them).

The allocator then takes the same steps on both nodes and finds the same devices; the answer of
the first is carried to the other with its pool names mapped. A reason (or a failed request)
that quotes a name of the first node - a pool in ``invalid resource pools``, a device in a CEL
run-time error, a slice of the 1.34 combined layout, the best pool of a selector explanation -
is not carried: that node is solved on its own, so the answer is always the per-node one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from dra_constructs.cel._footprint import Read
from dra_constructs.cel._runtime import _attribute_value
from dra_constructs.cel.inventory import Device
from dra_constructs.cel.matching import selector_reads
from dra_constructs.errors import DraConstructsError
from dra_constructs.fit.allocator import Allocator, NodeResult
from dra_constructs.fit.model import Claim, DeviceClass, FitDevice, Node, Pool, SliceInfo
from dra_constructs.fit.pools import node_pools
from dra_constructs.target import Target

__all__ = ["FleetCache", "FleetKeys", "NodeNames", "carry", "claim_reads", "read_attributes"]


@dataclass(frozen=True)
class NodeNames:
    """The names of one node's problem, in the allocator's order: node, pools, slices."""

    node: str
    pools: tuple[tuple[str, str], ...]  # (driver, pool name) per gathered pool
    slices: tuple[str, ...]

    def differing(self, other: NodeNames) -> list[str]:
        """This node's names that ``other`` spells differently (what a carried reason must not quote)."""
        found = [self.node] if self.node != other.node else []
        found += [mine[1] for mine, theirs in zip(self.pools, other.pools, strict=True) if mine != theirs]
        found += [mine for mine, theirs in zip(self.slices, other.slices, strict=True) if mine != theirs]
        return found


class FleetKeys:
    """The equivalence key of each node for one set of claims, DeviceClasses and gates."""

    def __init__(self, allocator: Allocator, claims: Sequence[Claim]) -> None:
        self.allocator = allocator
        self.partitionable = allocator.gate("DRAPartitionableDevices")
        self.split = allocator.target.counter_sets_in_own_slice
        self.sort = allocator.target.allocator_sorts_pools
        self.reads = _claim_reads(allocator, claims)
        #: The attributes (domain, name) whose values the key holds; ``None``: all of them.
        self.read = _read_attributes(self.reads or [], claims)
        self._devices: dict[int, tuple[FitDevice, int]] = {}
        self._interned: dict[Any, int] = {}
        self._decide: dict[str, dict[str, bool]] = {}  # per driver: attribute name -> value keyed
        self._nodes: dict[str, tuple[Node, tuple[Any, NodeNames]]] = {}
        self._values: dict[int, tuple[Any, Any, bool]] = {}  # id(value) -> value, frozen, valid

    def key(self, node: Node) -> tuple[Any, NodeNames] | None:
        """The node's key and names; ``None`` when the claims cannot be keyed (solve every node)."""
        if self.reads is None:
            return None
        found = self._nodes.get(node.name)
        if found is None or found[0] is not node:
            found = self._nodes[node.name] = (node, self._key(node))
        return found[1]

    def _key(self, node: Node) -> tuple[Any, NodeNames]:
        parts: list[Any] = []
        pool_names: list[tuple[str, str]] = []
        slice_names: list[str] = []
        for pool, slices in node_pools(self.allocator.candidate_pools(node), node, self.partitionable, self.split,
                                       self.sort):
            pool_names.append((pool.driver, pool.name))
            offered = {id(s): index for index, s in enumerate(slices)}
            slice_names.extend(s.name for s in pool.slices)
            parts.append((pool.driver, pool.generation, pool.slice_count, _counter_sets(pool),
                          _rank([s.name for s in pool.slices]),
                          tuple(self._slice(s, offered.get(id(s)), node) for s in pool.slices)))
        return tuple(parts), NodeNames(node.name, tuple(pool_names), tuple(slice_names))

    def _slice(self, slice_: SliceInfo, offered: int | None, node: Node) -> Any:
        per_device = tuple(d.node_selection is not None and d.node_selection.matches(node)
                           for d in slice_.devices) if slice_.per_device and offered is not None else ()
        return (offered, slice_.per_device, slice_.counter_set_names, per_device,
                tuple(self._device(d) for d in slice_.devices))

    def _device(self, device: FitDevice) -> int:
        cached = self._devices.get(id(device))
        if cached is not None and cached[0] is device:
            return cached[1]
        raw = device.device
        allocated = self.allocator.allocated
        in_use: Any = ()
        if allocated.devices or allocated.capacity or allocated.shares:
            in_use = (device.id in allocated.devices, tuple(allocated.capacity.get(device.id, {}).items()),
                      device.id in allocated.shares)
        key = (raw.name, raw.driver, raw.allow_multiple_allocations, self._attributes(raw),
               tuple(raw.capacity.items()), tuple(device.capacity.items()),
               tuple(device.request_policies.items()), device.consumes, repr(device.taints) if device.taints else (),
               device.binding_conditions, device.allow_multiple, in_use)
        number = self._interned.setdefault(key, len(self._interned))  # equal devices: one small int
        self._devices[id(device)] = (device, number)
        return number

    def _attributes(self, raw: Device) -> tuple[Any, ...]:
        """Each attribute's name, with its value where a selector or constraint reads it.

        An attribute nobody reads (a GPU's ``uuid``) only counts by its name and validity: the
        runtime converts every attribute before evaluating, one bad value fails the selector.
        """
        found: list[Any] = []
        decide = self._decide.setdefault(raw.driver, {})
        values = self._values
        for name, value in raw.attributes.items():
            read = decide.get(name)
            if read is None:
                domain, _, ident = name.rpartition("/")
                read = decide[name] = self.read is None or (domain or raw.driver, ident) in self.read
            entry = values.get(id(value))  # equal values are one dict (``devices_from_slices``)
            if entry is None or entry[0] is not value:
                entry = values[id(value)] = (value, *_frozen(name, value))
            found.append((name, entry[1]) if read or not entry[2] else name)
        return tuple(found)


def _frozen(name: str, value: Any) -> tuple[Any, bool]:
    """A hashable form of an attribute's value, and whether the runtime converts it."""
    try:
        frozen: Any = tuple(value.items())
        hash(frozen)
    except (AttributeError, TypeError):
        return repr(value), False
    if type(value) is dict and len(value) == 1 and ("string" in value or "bool" in value):
        return frozen, True  # str() and bool() convert anything
    return frozen, _valid(name, frozen, value)


class FleetCache:
    """Node keys shared by the ``fit`` calls of one command (one per Pod): computed once for all
    calls on the same inventory, allocated state, target and gates whose claims read the same
    attributes (the key depends on nothing else of the claims)."""

    def __init__(self) -> None:
        self._keys: dict[Any, FleetKeys] = {}

    def keys(self, allocator: Allocator, claims: Sequence[Claim]) -> FleetKeys:
        fresh = FleetKeys(allocator, claims)
        allocated = allocator.allocated
        ident = (id(allocator.inventory), fresh.reads is None, fresh.partitionable, fresh.split, fresh.sort,
                 None if fresh.read is None else frozenset(fresh.read), frozenset(allocated.devices),
                 frozenset((k, tuple(sorted(v.items()))) for k, v in allocated.capacity.items()),
                 frozenset(allocated.shares))
        found = self._keys.get(ident)
        if found is None or found.allocator.inventory is not allocator.inventory:
            self._keys[ident] = fresh
            return fresh
        found.allocator = allocator  # the same inventory and state, this call's allocator
        return found


def _claim_reads(allocator: Allocator, claims: Sequence[Claim]) -> list[tuple[Read, ...]] | None:
    """The footprint of every selector the claims run (DeviceClass's and request's), or ``None``."""
    return claim_reads(claims, allocator.classes, allocator.target)


def claim_reads(claims: Sequence[Claim], classes: Mapping[str, DeviceClass],
                target: Target) -> list[tuple[Read, ...]] | None:
    """The footprint of every selector ``claims`` run with ``classes``, or ``None`` (one does not compile)."""
    expressions: list[str] = []
    for claim in claims:
        for request in claim.requests:
            for sub in request.alternatives:
                device_class = classes.get(sub.device_class)
                if device_class is not None:
                    expressions.extend(device_class.selectors)
                expressions.extend(sub.selectors)
    try:
        return [selector_reads(e, target) for e in dict.fromkeys(expressions)]
    except DraConstructsError:
        return None  # the allocator reports it, node by node


def read_attributes(claims: Sequence[Claim], classes: Mapping[str, DeviceClass],
                    target: Target) -> set[tuple[str, str]] | None:
    """The (domain, name) of every attribute the claims' selectors read or constraints compare;
    ``None`` when that is not narrower than all of them (or a selector does not compile)."""
    reads = claim_reads(claims, classes, target)
    return None if reads is None else _read_attributes(reads, claims)


def _read_attributes(reads: Sequence[tuple[Read, ...]], claims: Sequence[Claim]) -> set[tuple[str, str]] | None:
    """The attributes the selectors read and the constraints compare; ``None`` when not narrower."""
    names: set[tuple[str, str]] = set()
    for footprint in reads:
        for read in footprint:
            if read[0] == "all" or (read[0] == "attr" and (read[1] is None or read[2] is None)):
                return None
            if read[0] == "attr":
                names.add((read[1], read[2]))
    for claim in claims:
        for constraint in claim.constraints:
            if "/" not in constraint.attribute:
                return None  # a plain name: keep every value (simpler than following lookupAttribute)
            first, _, rest = constraint.attribute.partition("/")
            last_domain, _, last = constraint.attribute.rpartition("/")
            names |= {(first, rest), (last_domain, last)}
    return names


_validity: dict[Any, bool] = {}


def _valid(name: str, frozen: Any, value: Any) -> bool:
    """Whether the runtime converts the attribute (``_attribute_value``); cached per value."""
    key = (name, frozen)
    found = _validity.get(key)
    if found is None:
        try:
            _attribute_value(name, value)
            found = True
        except Exception:  # any failure: the value then counts in full
            found = False
        if len(_validity) > 1 << 16:
            _validity.clear()
        _validity[key] = found
    return found


def _counter_sets(pool: Pool) -> Any:
    return tuple((name, tuple(sorted(counters.items()))) for name, counters in pool.counter_sets.items())


def _rank(names: Sequence[str]) -> tuple[int, ...]:
    """The order of ``names`` (what sorting by name sees), and which of them repeat."""
    order = sorted(range(len(names)), key=lambda i: names[i])
    return (*order, *(i for i in range(1, len(order)) if names[order[i]] == names[order[i - 1]]), -1)


def carry(result: NodeResult, source: NodeNames, target: NodeNames) -> NodeResult | None:
    """``result`` (of ``source``'s node) for the equivalent node ``target``; ``None`` if it quotes a name."""
    differing = source.differing(target)
    texts: Iterable[str | None] = (result.reason, *(result.failed or ()))
    if any(name and text and name in text for name in differing for text in texts):
        return None
    pools: Mapping[tuple[str, str], str] = {
        mine: theirs[1] for mine, theirs in zip(source.pools, target.pools, strict=True)}
    devices = [replace(d, pool=pools.get((d.driver, d.pool), d.pool)) for d in result.devices]
    return replace(result, node=target.node, devices=devices)
