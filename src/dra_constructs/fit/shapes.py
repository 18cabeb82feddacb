"""Read a fleet's ResourceSlices slice by slice and keep one node of each shape (issue 25).

``fit/fleet.py`` solves equivalent nodes once, but only after the whole inventory is parsed: a
5,000-node fleet is ~1M devices, 10 GB of objects. Here each ResourceSlice is hashed as it is
read (``kubectl -o json`` files item by item, ``_json_stream.py``) and dropped; a node's *shape*
is the hashes of its slices with every name left out. Nodes of one shape are parsed and solved
once and the answer carried to the others; memory holds a hash and a file span per slice.

A slice's hash covers its whole object except ``metadata`` (kept: its name, for the order),
``spec.nodeName`` and ``spec.pool.name``: devices, attributes, capacities, counters, taints,
binding conditions, pool generation and slice count. The value of a ``string`` attribute no
claim's selector reads and no constraint compares (``fleet.read_attributes``: a GPU's ``uuid``)
is left out too - any string converts, so it cannot change an answer; the attributes left out
are listed in the hash. A node's shape adds, per pool (in the inventory's order), the order of
its slice names, the order of the pools by driver and name, the devices of it ``--allocated``
holds (names, capacity consumed, shares) and the DeviceTaintRules naming the pool.

Only nodes whose pools are their own are grouped: every slice of the pool names the node in
``nodeName`` and nothing else (no ``allNodes``, ``nodeSelector``, ``perDeviceNodeSelection``).
One slice that does not, an attribute a DeviceClass of the slice files reads but the claims'
estimate did not, or a value the hash cannot encode, and every slice is read again and parsed
(the per-node path of ``fit/fleet.py``, as before). An answer that quotes a name of the node
solved (``fleet.carry``) is not carried: that node is parsed and solved on its own.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import orjson

from dra_constructs._io import ReadBudget
from dra_constructs._json_like import BYTES_PER_LEARNT_STRING, BYTES_PER_STRING, LEARN_ALLOWANCE, WALK_ALLOWANCE
from dra_constructs._json_stream import NotStreamable, list_chunks, parse_item, read_item
from dra_constructs._progress import Progress
from dra_constructs.errors import DraConstructsError
from dra_constructs.fit import FitReport, fit
from dra_constructs.fit.allocator import DEFAULT_STEP_BUDGET, AllocatedState, NodeResult
from dra_constructs.fit.fleet import FleetCache, NodeNames, carry
from dra_constructs.fit.likeness import Template
from dra_constructs.fit.limits import check_slice_limits
from dra_constructs.fit.model import Claim, DeviceClass, Inventory, Node
from dra_constructs.guardrails.loader import STDIN, document_objects, load_paths
from dra_constructs.target import Target

__all__ = ["FleetReader", "FleetShapes", "fit_fleet"]

_BLANK = {"string": ""}
#: Slices kept as templates (``fit/likeness.py``): a node has a few kinds of slice (each costs
#: ~20 ms to learn; beyond these, slices are parsed as before), and of one layout (the text
#: outside strings: a node's GPUs) a few.
_MAX_TEMPLATES = 256
_MAX_TEMPLATES_ALIKE = 16
#: Failed walks and learning are bounded as ``_json_like.py`` says (module names: tests lower them).
_WALK_ALLOWANCE = WALK_ALLOWANCE
_BYTES_PER_STRING = BYTES_PER_STRING
_LEARN_ALLOWANCE = LEARN_ALLOWANCE
_BYTES_PER_LEARNT_STRING = BYTES_PER_LEARNT_STRING
_Span = tuple[str, int, int, int]  # file, start, end, line: an item to read again


@dataclass
class _Slice:
    pool: tuple[str, str]
    node: str | None  # the node the slice is for, when it names only that one
    name: str
    digest: bytes | None
    source: dict[str, Any] | _Span


@dataclass(frozen=True)
class _Alias:
    """A node answered from another node of its shape."""

    node: Node
    rep: str
    rep_names: NodeNames
    names: NodeNames
    sources: tuple[dict[str, Any] | _Span, ...]


@dataclass
class FleetShapes:
    """What ``fit`` parses (one node of each shape, the other objects) and who stands for whom."""

    slices: list[dict[str, Any]]
    nodes: list[Node]  # Node objects for the inventory (those of aliased nodes left out)
    order: list[str]  # every node, as the whole inventory would list them
    aliases: dict[str, _Alias] = field(default_factory=dict)


def _load(source: dict[str, Any] | _Span) -> dict[str, Any]:
    if isinstance(source, dict):
        return source
    value: dict[str, Any] = read_item(*source)
    return value


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class FleetReader:
    """ResourceSlices hashed as they are read; every other object kept (``others``)."""

    def __init__(self, read: set[tuple[str, str]] | None, target: Target) -> None:
        #: The attributes whose values the hashes keep (``None``: every one).
        self.read = read
        self.target = target
        self.slices: list[_Slice] = []
        self.others: list[dict[str, Any]] = []
        self.groupable = True
        self._checked: set[bytes] = set()
        self._unread: dict[tuple[str, str], bool] = {}
        self._templates: list[tuple[Template, _Slice]] = []
        self._alike: dict[bytes, int] = {}
        self._next = 0
        self._learnt = 0
        self._allowance = _WALK_ALLOWANCE  # variable strings failed walks may still pass
        self._learning = _LEARN_ALLOWANCE  # strings new templates may still hold

    def read_path(self, path: str, budget: ReadBudget, stdin: IO[str] | None = None,
                  progress: Progress | None = None) -> None:
        """Add the objects of ``path`` (a ``.json`` file item by item; anything else whole)."""
        if path != STDIN and path.lower().endswith(".json") and os.path.isfile(path):
            marks, left = (len(self.slices), len(self.others)), budget.left
            try:
                for count, chunk in enumerate(list_chunks(path, budget, self._match), 1):
                    span: _Span = (path, chunk.start, chunk.end, chunk.line)
                    self._allowance += (chunk.end - chunk.start) // _BYTES_PER_STRING
                    self._learning += (chunk.end - chunk.start) // _BYTES_PER_LEARNT_STRING
                    if chunk.matched is not None:
                        slice_, like = chunk.matched
                        digest = slice_.digest if self.groupable else None  # (as ``add`` hashes then)
                        self.slices.append(_Slice((slice_.pool[0], like.pool), like.node, like.name, digest, span))
                    else:
                        value = parse_item(chunk.data, path, chunk.line)
                        for obj, _line in document_objects(value, path, chunk.line):
                            added = len(self.slices)
                            self.add(obj, span if obj is value else obj)
                            if obj is value and len(self.slices) > added:
                                self._learn(chunk.data, obj)
                    if progress is not None and count % 256 == 0:
                        progress.update(count, unit="slices")
                return
            except (NotStreamable, DraConstructsError):  # not streamed, or an error to report as before:
                del self.slices[marks[0]:], self.others[marks[1]:]
                budget.left = left  # read again, whole, by the loader (which reports any error)
        for manifest in load_paths([path], stdin, budget=budget, progress=progress):
            self.add(manifest.obj, manifest.obj)

    def _match(self, text: bytearray, start: int, limit: int, close: bytes) -> tuple[int, int, Any] | None:
        """The item at ``start`` as a slice like one parsed before (``fit/likeness.py``), if it is one."""
        templates = self._templates
        count = len(templates)
        for offset in range(count):  # the next template first: a node's slices come in the same order
            if self._allowance <= 0:  # failed walks have cost what parsing would: parse
                return None
            index = (self._next + offset) % count
            template, slice_ = templates[index]
            if template.close != close:
                continue
            wasted = template.wasted
            found = template.match(text, start, limit)
            self._allowance -= template.wasted - wasted
            if found is not None:
                self._next = index + 1
                return found[0], template.newlines, (slice_, found[1])
        return None

    def _learn(self, data: bytes, obj: dict[str, Any]) -> None:
        """The slice just added (``obj``), if hashed and with no backslash in its text, as a template."""
        last = self.slices[-1]
        if not self.groupable or last.digest is None or b"\\" in data or self._learnt >= _MAX_TEMPLATES:
            return
        layout = hashlib.blake2b(b'"'.join(data.split(b'"')[0::2]), digest_size=16).digest()  # outside strings
        if self._alike.get(layout, 0) >= _MAX_TEMPLATES_ALIKE:  # (slices that differ in what is read: parsed)
            return
        strings = data.count(b'"') // 2
        if strings > self._learning:  # (learnt when the bytes read have earned it)
            return
        self._learning -= strings
        self._alike[layout] = self._alike.get(layout, 0) + 1
        spec = obj["spec"]
        driver = last.pool[0]

        def changeable(path: tuple[Any, ...]) -> bool:
            if path[0] == "metadata" or path in (("spec", "nodeName"), ("spec", "pool", "name")):
                return True
            return self._blanked(path, spec, driver)

        self._learnt += 1
        try:
            self._templates.append((Template(data, changeable), last))
        except ValueError:  # no metadata.name (the hash names it by position)
            return

    def _blanked(self, path: tuple[Any, ...], spec: dict[str, Any], driver: str) -> bool:
        """Whether the string at ``path`` is an attribute value ``_digest`` leaves out."""
        if self.read is None or len(path) not in (6, 7) or path[:2] != ("spec", "devices") or path[-1] != "string":
            return False
        devices = spec.get("devices")
        if not isinstance(devices, list) or not isinstance(path[2], int) or path[2] >= len(devices):
            return False
        device = devices[path[2]]
        if type(device) is not dict:
            return False
        basic = device.get("basic")
        body = basic if type(basic) is dict and basic else device
        if path[3:-2] != (("basic", "attributes") if body is basic else ("attributes",)):
            return False
        attributes = body.get("attributes")
        value = attributes.get(path[-2]) if type(attributes) is dict else None
        return (type(value) is dict and len(value) == 1 and type(value.get("string")) is str
                and self._is_unread(driver, path[-2]))

    def add(self, obj: dict[str, Any], source: dict[str, Any] | _Span) -> None:
        """One object: a ResourceSlice is checked against the API's limits and hashed."""
        if obj.get("kind") != "ResourceSlice":
            self.others.append(obj)
            return
        spec = _dict(obj.get("spec"))
        pool = spec.get("pool")
        key = (str(spec.get("driver") or ""), str(_dict(pool).get("name") or ""))
        name = str(_dict(obj.get("metadata")).get("name") or f"slices[{len(self.slices)}]")
        node = spec.get("nodeName")
        own = (isinstance(node, str) and bool(node) and isinstance(pool, dict) and all(key)
               and not spec.get("allNodes") and spec.get("nodeSelector") is None
               and not spec.get("perDeviceNodeSelection"))
        digest = self._digest(obj, spec, key[0]) if own and self.groupable else None
        if digest is None:
            self.groupable = False
        if digest is None or digest not in self._checked:  # the limits read only what the hash holds
            check_slice_limits([obj], self.target)
            if digest is not None:
                self._checked.add(digest)
        self.slices.append(_Slice(key, node if own else None, name, digest, source))

    def _digest(self, obj: dict[str, Any], spec: dict[str, Any], driver: str) -> bytes | None:
        rest = {k: v for k, v in spec.items() if k not in ("nodeName", "pool", "devices")}
        pool = {k: v for k, v in spec["pool"].items() if k != "name"}
        devices = spec.get("devices")
        blanked: list[tuple[int, str]] = []
        if isinstance(devices, list) and self.read is not None:
            devices = [self._blank(index, device, driver, blanked) for index, device in enumerate(devices)]
        try:
            text = orjson.dumps([obj.get("apiVersion"), rest, pool, devices, blanked])
        except (TypeError, orjson.JSONEncodeError):
            return None  # (YAML input: a value JSON cannot hold) not grouped
        return hashlib.blake2b(text, digest_size=16).digest()

    def _blank(self, index: int, device: Any, driver: str, blanked: list[tuple[int, str]]) -> Any:
        if type(device) is not dict:
            return device
        basic = device.get("basic")
        body = basic if type(basic) is dict and basic else device  # v1beta1 nests the fields under basic
        attributes = body.get("attributes")
        if type(attributes) is not dict:
            return device
        copied: dict[str, Any] | None = None
        for name, value in attributes.items():
            if type(value) is dict and len(value) == 1 and type(value.get("string")) is str and self._is_unread(
                    driver, name):
                if copied is None:
                    copied = dict(attributes)
                copied[name] = _BLANK
                blanked.append((index, name))
        if copied is None:
            return device
        changed = {**body, "attributes": copied}
        return {**device, "basic": changed} if body is basic else changed

    def _is_unread(self, driver: str, name: str) -> bool:
        found = self._unread.get((driver, name))
        if found is None:
            domain, _, ident = name.rpartition("/")
            found = self._unread[driver, name] = self.read is not None and (domain or driver, ident) not in self.read
        return found

    def shapes(self, nodes: Sequence[Node], allocated: AllocatedState, taint_rules: Sequence[Mapping[str, Any]],
               read: set[tuple[str, str]] | None) -> FleetShapes:
        """Group the slices into nodes; ``read``: the attributes the claims read with every DeviceClass known."""
        pools: dict[tuple[str, str], list[_Slice]] = {}
        for each in self.slices:
            pools.setdefault(each.pool, []).append(each)
        owners: dict[str, list[tuple[str, str]]] = {}
        groupable = self.groupable and (self.read is None or (read is not None and read <= self.read))
        for key, slices in pools.items():
            nodes_named = {s.node for s in slices}
            if len(nodes_named) != 1 or None in nodes_named:
                groupable = False
                break
            owners.setdefault(str(slices[0].node), []).append(key)
        if not groupable or not owners:
            return FleetShapes([_load(s.source) for s in self.slices], list(nodes), [], {})
        known = {n.name: n for n in nodes}
        order = list(dict.fromkeys([*known, *owners]))
        allocation = _allocation_index(allocated)
        rules = [(i, _dict(_dict(r.get("spec")).get("deviceSelector")), _dict(_dict(r.get("spec")).get("taint")))
                 for i, r in enumerate(taint_rules)]
        named_rules = [(i, s, t) for i, s, t in rules if t and s.get("pool") is not None]
        first: dict[Any, str] = {}
        aliases: dict[str, _Alias] = {}
        names_of: dict[str, NodeNames] = {}
        kept: list[dict[str, Any]] = []
        for node_name, keys in owners.items():
            parts: list[Any] = []
            for driver, pool_name in keys:
                slices = pools[driver, pool_name]
                mine = [(i, repr(sorted(s.items())), repr(t)) for i, s, t in named_rules
                        if s.get("pool") == pool_name and s.get("driver") in (None, driver)]
                parts.append((driver, _rank([s.name for s in slices]), tuple(s.digest for s in slices),
                              tuple(sorted(allocation.get(f"{driver}/{pool_name}", ()))), tuple(mine)))
            shape = (tuple(parts), _rank([f"{d}\0{p}" for d, p in keys]))
            names = NodeNames(node_name, tuple(keys), tuple(s.name for k in keys for s in pools[k]))
            rep = first.setdefault(shape, node_name)
            if rep == node_name:
                names_of[node_name] = names
                kept += [_load(s.source) for k in keys for s in pools[k]]
            else:
                node = known.get(node_name) or Node(node_name, {"kubernetes.io/hostname": node_name})
                aliases[node_name] = _Alias(node, rep, names_of[rep], names,
                                            tuple(s.source for k in keys for s in pools[k]))
        return FleetShapes(kept, [n for n in nodes if n.name not in aliases], order, aliases)


def _rank(names: Sequence[str]) -> tuple[int, ...]:
    """The order of ``names`` (what sorting by name sees), and which of them repeat."""
    order = sorted(range(len(names)), key=lambda i: names[i])
    return (*order, *(i for i in range(1, len(order)) if names[order[i]] == names[order[i - 1]]), -1)


def _allocation_index(allocated: AllocatedState) -> dict[str, list[tuple[Any, ...]]]:
    """Allocated devices by every ``driver/pool`` prefix of their ID (a pool name may hold ``/``)."""
    index: dict[str, list[tuple[Any, ...]]] = {}
    for device_id in {*allocated.devices, *allocated.capacity, *allocated.shares}:
        entry = (device_id in allocated.devices, tuple(sorted(allocated.capacity.get(device_id, {}).items())),
                 len(allocated.shares.get(device_id, ())))
        cut = device_id.find("/")
        while cut >= 0:
            cut = device_id.find("/", cut + 1)
            if cut >= 0:
                index.setdefault(device_id[:cut], []).append((device_id[cut + 1:], *entry))
    return index


def fit_fleet(claims: Sequence[Claim], inventory: Inventory, shapes: FleetShapes, *, target: Target,
              classes: Mapping[str, DeviceClass], gates: Mapping[str, bool], allocated: AllocatedState,
              taint_rules: Sequence[Mapping[str, Any]] = (), nodes: Iterable[str] | None = None,
              count: bool = False, fleet: FleetCache | None = None,
              progress: Callable[[int, int], None] | None = None,
              step_budget: int = DEFAULT_STEP_BUDGET) -> FitReport:
    """:func:`~dra_constructs.fit.fit` on ``inventory`` (built from ``shapes.slices``), every node answered."""
    wanted = set(nodes) if nodes is not None else None
    options: dict[str, Any] = {"target": target, "classes": classes, "gates": gates, "allocated": allocated,
                               "count": count, "step_budget": step_budget}
    solve = None
    if wanted is not None:
        solve = [n.name for n in inventory.nodes if n.name in wanted] + [
            a.rep for name, a in shapes.aliases.items() if name in wanted]
    report = fit(claims, inventory, nodes=solve, fleet=fleet, progress=progress, **options)
    if not shapes.aliases:
        return report
    result = FitReport(counts={} if count else None)
    for name in shapes.order:
        if wanted is not None and name not in wanted:
            continue
        alias = shapes.aliases.get(name)
        solved = name if alias is None else alias.rep
        answer: NodeResult | None = report.nodes.get(solved)
        placed = report.counts.get(solved, 0) if report.counts is not None else 0
        if alias is not None and answer is not None:
            answer = carry(answer, alias.rep_names, alias.names)
            if answer is None:  # the answer quotes a name of the node solved: this one on its own
                alone = fit(claims, Inventory.from_slices([_load(s) for s in alias.sources], [alias.node],
                                                          taint_rules), nodes=[name], dedupe=False, **options)
                answer = alone.nodes[name]
                placed = alone.counts.get(name, 0) if alone.counts is not None else 0
        if answer is None:
            continue
        result.nodes[name] = answer
        if result.counts is not None:
            result.counts[name] = placed
    return result

