"""The inputs of a fit check: devices in pools, counter sets, nodes (claims: ``fit/claims.py``).

Built from API objects as ``kubectl get -o yaml`` prints them (``resource.k8s.io`` v1beta1,
v1beta2 and v1 shapes). Device-level fields (attributes, capacity, ``consumesCounters``,
``taints``) come from :func:`dra_constructs.cel.devices_from_slices`; the slice-level fields the
allocator needs (pool generation and slice count, ``sharedCounters``, node selection,
``perDeviceNodeSelection``, binding conditions) are read here. Malformed objects raise
:class:`~dra_constructs.errors.DraConstructsError` naming object, field and value.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from dra_constructs._safe_load import no_gc
from dra_constructs.cel.inventory import Device, devices_from_slices
from dra_constructs.errors import DraConstructsError
from dra_constructs.fit.capacity import RequestPolicy
from dra_constructs.fit.claims import Claim, Constraint, DeviceClass, Request, SubRequest, Toleration, claim_from_spec
from dra_constructs.fit.quantities import _quantity, quantity

__all__ = [
    "Claim",
    "Constraint",
    "DeviceClass",
    "FitDevice",
    "Inventory",
    "Node",
    "Pool",
    "Request",
    "SubRequest",
    "Toleration",
    "claim_from_spec",
    "quantity",
]

Counters = dict[str, Fraction]


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass(frozen=True)
class Node:
    """A node the allocator may pick: its name and labels (for slice ``nodeSelector``)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


def _requirement_matches(requirement: Mapping[str, Any], value: str | None) -> bool:
    operator = requirement.get("operator")
    values = [str(v) for v in _as_list(requirement.get("values"))]
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            left, right = int(value), int(values[0])
        except ValueError:
            return False
        return left > right if operator == "Gt" else left < right
    return False


def node_selector_matches(selector: Mapping[str, Any], node: Node) -> bool:
    """``v1.NodeSelector``: any term matches; a term's expressions and fields all match."""
    for term in _as_list(selector.get("nodeSelectorTerms")):
        term = _as_dict(term)
        expressions = [_as_dict(r) for r in _as_list(term.get("matchExpressions"))]
        fields = [_as_dict(r) for r in _as_list(term.get("matchFields"))]
        if not expressions and not fields:
            continue  # an empty term matches nothing
        if all(_requirement_matches(r, node.labels.get(str(r.get("key")))) for r in expressions) and all(
                _requirement_matches(r, node.name if r.get("key") == "metadata.name" else None) for r in fields):
            return True
    return False


@dataclass(frozen=True)
class NodeSelection:
    """Where a slice (or, with ``perDeviceNodeSelection``, a device) is available."""

    node_name: str | None = None
    all_nodes: bool = False
    node_selector: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> NodeSelection:
        selector = spec.get("nodeSelector")
        name = spec.get("nodeName")
        return cls(str(name) if name else None, bool(spec.get("allNodes")),
                   selector if isinstance(selector, dict) else None)

    @property
    def is_set(self) -> bool:
        return self.node_name is not None or self.all_nodes or self.node_selector is not None

    def matches(self, node: Node) -> bool:
        """``NodeMatches``: nodeName, allNodes or the selector."""
        if self.node_name is not None:
            return node.name == self.node_name
        if self.all_nodes:
            return True
        if self.node_selector is not None:
            return node_selector_matches(self.node_selector, node)
        return False


@dataclass(eq=False)
class FitDevice:
    """One device with what allocation needs beyond CEL: counters, taints, node selection."""

    device: Device
    pool: Pool
    slice_name: str
    consumes: tuple[tuple[str, tuple[tuple[str, Fraction], ...]], ...]
    taints: tuple[Mapping[str, Any], ...]
    binding_conditions: bool
    node_selection: NodeSelection | None  # set with perDeviceNodeSelection
    allow_multiple: bool
    capacity: Mapping[str, Fraction]
    request_policies: Mapping[str, RequestPolicy]

    @property
    def id(self) -> str:
        return self.device.id


@dataclass(eq=False)
class SliceInfo:
    """One ResourceSlice of a pool (current generation)."""

    name: str
    selection: NodeSelection
    per_device: bool
    devices: list[FitDevice] = field(default_factory=list)
    #: The names of its ``sharedCounters``, as listed (repeats kept: they make the pool invalid).
    counter_set_names: tuple[str, ...] = ()

    def targets(self, node: Node) -> bool:
        """Whether the slice offers devices to ``node`` (``GatherPools``)."""
        if self.selection.is_set:
            return self.selection.matches(node)
        if self.per_device:
            return any(d.node_selection is not None and d.node_selection.matches(node) for d in self.devices)
        return False


@dataclass(eq=False)
class Pool:
    """A resource pool: its current-generation slices and counter sets."""

    driver: str
    name: str
    generation: int
    slice_count: int
    slices: list[SliceInfo] = field(default_factory=list)
    counter_sets: dict[str, Counters] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.driver}/{self.name}"

    @property
    def incomplete(self) -> bool:
        return len(self.slices) != self.slice_count



def _counter_map(raw: Any, where: str, field_name: str) -> Counters:
    counters: Counters = {}
    for name, value in _as_dict(raw).items():
        text = value.get("value") if isinstance(value, dict) else value
        counters[str(name)] = quantity(str(text), where, f"{field_name}.{name}")
    return counters


def _taint_rules_by_device(rules: Sequence[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    found: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
    for rule in rules:
        spec = _as_dict(rule.get("spec"))
        selector = _as_dict(spec.get("deviceSelector"))
        taint = _as_dict(spec.get("taint"))
        if taint:
            found.append((selector, taint))
    return found


@dataclass
class Inventory:
    """Pools of devices (as the scheduler's informers see them) and the nodes to try."""

    pools: list[Pool]
    nodes: list[Node]

    @property
    def devices(self) -> list[FitDevice]:
        return [d for p in self.pools for s in p.slices for d in s.devices]

    def __iter__(self) -> Iterator[Device]:
        """The devices as CEL sees them (an inventory also serves where a list of devices did)."""
        return (d.device for d in self.devices)

    def __len__(self) -> int:
        return sum(len(s.devices) for p in self.pools for s in p.slices)

    @classmethod
    def from_slices(cls, slices: Iterable[Mapping[str, Any]], nodes: Iterable[Node] = (),
                    taint_rules: Sequence[Mapping[str, Any]] = ()) -> Inventory:
        """Group slices into pools (highest generation wins) and list the nodes.

        Nodes: those given (``kind: Node`` objects), plus every ``nodeName`` a slice or device
        names; a node known only by name carries the label ``kubernetes.io/hostname``. Without
        any, one node ``*`` stands for "any node" (only ``allNodes`` slices reach it).
        """
        with no_gc():  # a fleet's inventory is millions of objects: no collector passes over them while built
            return cls._from_slices(slices, nodes, taint_rules)

    @classmethod
    def _from_slices(cls, slices: Iterable[Mapping[str, Any]], nodes: Iterable[Node],
                     taint_rules: Sequence[Mapping[str, Any]]) -> Inventory:
        rules = _taint_rules_by_device(taint_rules)
        raw_pools: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        order: list[tuple[str, str]] = []
        for index, raw in enumerate(slices):
            spec = _as_dict(raw.get("spec"))
            name = str(_as_dict(raw.get("metadata")).get("name") or f"slices[{index}]")
            pool_spec = _as_dict(spec.get("pool"))
            key = (str(spec.get("driver") or ""), str(pool_spec.get("name") or ""))
            if not key[0] or not key[1]:
                raise DraConstructsError(name, "spec.driver/spec.pool.name", key, "a ResourceSlice needs both",
                                         "pass complete ResourceSlice objects (kubectl get resourceslices -o yaml)")
            if key not in raw_pools:
                raw_pools[key] = []
                order.append(key)
            raw_pools[key].append(raw)
        pools = [cls._pool(key, raw_pools[key], rules) for key in order]
        known = {n.name: n for n in nodes}
        for each in pools:
            for slice_ in each.slices:
                names = [slice_.selection.node_name] + [d.node_selection.node_name for d in slice_.devices
                                                        if d.node_selection is not None]
                for node_name in names:
                    if node_name and node_name not in known:
                        known[node_name] = Node(node_name, {"kubernetes.io/hostname": node_name})
        return cls(pools, list(known.values()) or [Node("*")])

    @classmethod
    def from_devices(cls, devices: Iterable[Device]) -> Inventory:
        """An inventory of bare devices (no counter sets): one pool per ``driver/pool``, on ``device.node``."""
        pools: dict[tuple[str, str, str | None], Pool] = {}
        nodes: dict[str, Node] = {}
        for device in devices:
            key = (device.driver, device.pool, device.node)
            found = pools.get(key)
            if found is None:
                found = pools[key] = Pool(device.driver, device.pool, 0, 1)
            pool = found
            if not pool.slices:
                selection = NodeSelection(device.node) if device.node else NodeSelection(all_nodes=True)
                pool.slices.append(SliceInfo(f"{device.driver}/{device.pool}", selection, False))
            where = f"device {device.id}"
            consumes = tuple((counter_set, tuple((k, quantity(v, where, "consumesCounters")) for k, v in c.items()))
                             for counter_set, c in device.consumes_counters)
            pool.slices[0].devices.append(FitDevice(
                device=device, pool=pool, slice_name=pool.slices[0].name, consumes=consumes, taints=device.taints,
                binding_conditions=False, node_selection=None, allow_multiple=bool(device.allow_multiple_allocations),
                capacity={}, request_policies={}))
            if device.node and device.node not in nodes:
                nodes[device.node] = Node(device.node, {"kubernetes.io/hostname": device.node})
        return cls(list(pools.values()), list(nodes.values()) or [Node("*")])

    @staticmethod
    def _pool(key: tuple[str, str], raws: list[Mapping[str, Any]],
              rules: list[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> Pool:
        def generation(raw: Mapping[str, Any]) -> int:
            value = _as_dict(_as_dict(raw.get("spec")).get("pool")).get("generation", 0)
            return value if isinstance(value, int) else 0

        newest = max(generation(r) for r in raws)
        current = [r for r in raws if generation(r) == newest]
        first = _as_dict(_as_dict(current[0].get("spec")).get("pool"))
        count = first.get("resourceSliceCount", 1)
        pool = Pool(key[0], key[1], newest, count if isinstance(count, int) else 1)
        for raw in current:
            spec = _as_dict(raw.get("spec"))
            name = str(_as_dict(raw.get("metadata")).get("name") or pool.key)
            for counter_set in _as_list(spec.get("sharedCounters")):
                counter_set = _as_dict(counter_set)
                set_name = str(counter_set.get("name") or "")
                pool.counter_sets[set_name] = _counter_map(counter_set.get("counters"), name,
                                                           f"spec.sharedCounters[{set_name}].counters")
            slice_ = SliceInfo(name, NodeSelection.of(spec), bool(spec.get("perDeviceNodeSelection")),
                               counter_set_names=tuple(str(_as_dict(c).get("name") or "")
                                                       for c in _as_list(spec.get("sharedCounters"))))
            raw_devices = [d for d in _as_list(spec.get("devices")) if isinstance(d, dict)]
            parsed = devices_from_slices([{"metadata": {"name": name},
                                           "spec": {**spec, "devices": raw_devices}}]) if raw_devices else []
            for raw_device, device in zip(raw_devices, parsed, strict=True):
                slice_.devices.append(_fit_device(device, raw_device, pool, slice_, rules))
            pool.slices.append(slice_)
        return pool


_consumptions: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[str, tuple[tuple[str, Fraction], ...]]] = {}


def _consumption(counter_set: str, counters: Mapping[str, str],
                 where: str) -> tuple[str, tuple[tuple[str, Fraction], ...]]:
    """One ``consumesCounters`` entry with exact amounts; a fleet repeats each one on every node
    (and shares the tuple: less memory), so each is converted once."""
    key = (counter_set, tuple(counters.items()))
    found = _consumptions.get(key)
    if found is None:
        found = (counter_set, tuple((k, quantity(v, where, f"consumesCounters[{counter_set}].{k}"))
                                    for k, v in counters.items()))
        if len(_consumptions) > 1 << 16:
            _consumptions.clear()
        _consumptions[key] = found
    return found


def _fit_device(device: Device, raw: Mapping[str, Any], pool: Pool, slice_: SliceInfo,
                rules: list[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> FitDevice:
    body = _as_dict(raw.get("basic")) or raw
    where = f"{slice_.name}: device {device.name}"
    consumes = tuple(_consumption(counter_set, counters, where) for counter_set, counters in device.consumes_counters)
    taints = list(device.taints)
    for selector, taint in rules:
        if all(selector.get(k) in (None, value) for k, value in
               (("driver", device.driver), ("pool", device.pool), ("device", device.name))):
            taints.append(taint)
    capacity: dict[str, Fraction] = {}
    policies: dict[str, RequestPolicy] = {}
    for name, value in _as_dict(body.get("capacity")).items():
        text = value.get("value") if isinstance(value, dict) else value
        parsed = _quantity(str(text))
        if isinstance(parsed, str):
            continue
        capacity[str(name)] = parsed
        if isinstance(value, dict) and isinstance(value.get("requestPolicy"), dict):
            policies[str(name)] = RequestPolicy.parse(value["requestPolicy"], where, f"capacity.{name}.requestPolicy")
    selection = NodeSelection.of(body) if slice_.per_device else None
    return FitDevice(device=device, pool=pool, slice_name=slice_.name, consumes=consumes, taints=tuple(taints),
                     binding_conditions=bool(body.get("bindingConditions")), node_selection=selection,
                     allow_multiple=bool(body.get("allowMultipleAllocations")), capacity=capacity,
                     request_policies=policies)
