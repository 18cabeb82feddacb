"""What a selector reads of a device, so results can be shared between identical readings.

A selector's result depends only on the device values it reads. The reads are found in the
checked AST: ``device.driver``, ``device.attributes['<domain>'].<name>`` (or ``[...]``),
``device.capacity[...]``, ``device.allowMultipleAllocations``; anything less precise widens
to the whole domain, the whole map or the whole device. Devices with equal readings get the
same result, so 100 selectors over the ~1,000 catalog devices evaluate only the distinct
readings (the cache is exact, not a heuristic: a wider read set is always safe).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dra_constructs.cel._runtime import DeviceError, _attribute_value
from dra_constructs.cel.inventory import Device
from dra_constructs.cel.quantity import QuantityError, parse_quantity

__all__ = ["Read", "footprint", "reading"]

# ("driver",) | ("multi",) | ("attr"|"cap", domain | None, name | None) | ("all",)
Read = tuple[Any, ...]
_MISSING = ("<missing>",)
_MAPS = {"device.attributes": "attr", "device.capacity": "cap"}


def _children(e: Any) -> Iterator[Any]:
    kind = e.WhichOneof("kind")
    if kind == "select_expr":
        yield e.select_expr.operand
    elif kind == "call_expr":
        if e.call_expr.HasField("target"):
            yield e.call_expr.target
        yield from e.call_expr.args
    elif kind == "list_expr":
        yield from e.list_expr.elements
    elif kind == "struct_expr":
        for entry in e.struct_expr.entries:
            if entry.HasField("map_key"):
                yield entry.map_key
            yield entry.value
    elif kind == "comprehension_expr":
        c = e.comprehension_expr
        yield from (c.iter_range, c.accu_init, c.loop_condition, c.loop_step, c.result)


def _const_key(e: Any) -> str | None:
    if e.WhichOneof("kind") == "const_expr" and e.const_expr.WhichOneof("kind") == "string_value":
        return str(e.const_expr.string_value)
    return None


def _access_key(parent: Any | None, child: Any) -> str | None:
    """The constant key of ``parent`` when it is ``child.<key>`` or ``child['<key>']``."""
    if parent is None:
        return None
    kind = parent.WhichOneof("kind")
    if kind == "select_expr" and parent.select_expr.operand.id == child.id:
        return str(parent.select_expr.field)
    if kind == "call_expr" and parent.call_expr.function == "_[_]" and len(parent.call_expr.args) == 2 \
            and parent.call_expr.args[0].id == child.id:
        return _const_key(parent.call_expr.args[1])
    return None


def footprint(checked: Any) -> tuple[Read, ...]:
    """The device reads of a checked selector (``(("all",),)`` when not narrower)."""
    reads: set[Read] = set()
    parents: dict[int, Any] = {}
    stack = [checked.expr]
    nodes = []
    while stack:
        node = stack.pop()
        nodes.append(node)
        for child in _children(node):
            parents[child.id] = node
            stack.append(child)
    for node in nodes:
        if node.WhichOneof("kind") != "ident_expr":
            continue
        name = node.ident_expr.name
        parent = parents.get(node.id)
        map_kind, map_node = _MAPS.get(name), node
        if name == "device":
            is_select = parent is not None and parent.WhichOneof("kind") == "select_expr"
            field = _access_key(parent, node) if is_select else None
            if field == "driver":
                reads.add(("driver",))
                continue
            if field == "allowMultipleAllocations":
                reads.add(("multi",))
                continue
            if parent is not None and field in ("attributes", "capacity") and not parent.select_expr.test_only:
                map_kind = "attr" if field == "attributes" else "cap"
                map_node, parent = parent, parents.get(parent.id)
            else:
                return (("all",),)
        if map_kind is None:
            continue
        if parent is not None and parent.WhichOneof("kind") == "select_expr" and parent.select_expr.test_only:
            continue  # has(device.attributes.<domain>) is always true
        domain = _access_key(parent, map_node)
        if domain is None or parent is None:
            reads.add((map_kind, None, None))
            continue
        grandparent = parents.get(parent.id)
        attribute = _access_key(grandparent, parent)
        reads.add((map_kind, domain, attribute))
    return tuple(sorted(reads, key=repr))


class _Index:
    """A device's values, hashable, grouped by domain."""

    __slots__ = ("attr", "cap", "driver", "frozen", "multi", "valid")

    def __init__(self, device: Device) -> None:
        self.driver = device.driver
        self.multi = device.allow_multiple_allocations
        self.attr: dict[str, dict[str, Any]] = {}
        self.cap: dict[str, dict[str, Any]] = {}
        # Go converts every attribute and capacity before evaluating: one bad value fails all.
        # Values repeat across devices (same product, driver, profile), so each is converted once.
        valid = True
        for name, value in device.attributes.items():
            domain, _, ident = name.rpartition("/")
            frozen = tuple(value.items()) if len(value) == 1 else tuple(sorted(value.items(), key=repr))
            self.attr.setdefault(domain or device.driver, {})[ident] = frozen
            valid = valid and _valid_attribute(name, frozen, value)
        for name, text in device.capacity.items():
            domain, _, ident = name.rpartition("/")
            self.cap.setdefault(domain or device.driver, {})[ident] = text
            valid = valid and _valid_quantity(text)
        self.frozen: dict[tuple[str, str | None], Any] = {}
        self.valid = valid


_valid_values: dict[Any, bool] = {}


def _valid_attribute(name: str, frozen: tuple[Any, ...], value: Any) -> bool:
    key: tuple[str, tuple[Any, ...]] | None = (name, frozen)
    try:
        found = _valid_values.get(key)
    except TypeError:  # an unhashable (malformed) value: convert it without caching
        key, found = None, None
    if found is None:
        try:
            _attribute_value(name, value)
            found = True
        except DeviceError:
            found = False
        if len(_valid_values) > 1 << 16:
            _valid_values.clear()
        if key is not None:
            _valid_values[key] = found
    return found


def _valid_quantity(text: str) -> bool:
    found = _valid_values.get(text)
    if found is None:
        try:
            parse_quantity(text)
            found = True
        except QuantityError:
            found = False
        _valid_values[text] = found
    return found


_indexes: dict[int, tuple[Device, _Index]] = {}


def _index(device: Device) -> _Index:
    found = _indexes.get(id(device))
    if found is not None and found[0] is device:
        return found[1]
    index = _Index(device)
    if len(_indexes) > 1 << 16:
        _indexes.clear()
    _indexes[id(device)] = (device, index)
    return index


_interned: dict[tuple[Any, ...], int] = {}


def _frozen(mapping: dict[str, Any]) -> int:
    """A small int naming the contents of ``mapping`` (cheap to hash in readings)."""
    key = tuple(sorted(mapping.items()))
    found = _interned.get(key)
    if found is None:
        found = len(_interned)
        _interned[key] = found
    return found


def reading(device: Device, reads: tuple[Read, ...]) -> tuple[Any, ...] | None:
    """The values ``reads`` see on ``device`` (``None``: no sharing, evaluate directly)."""
    index = _index(device)
    if not index.valid:
        return None
    values: list[Any] = []
    for read in reads:
        head = read[0]
        if head == "all":
            return None
        if head == "driver":
            values.append(index.driver)
        elif head == "multi":
            values.append(index.multi)
        else:
            maps = index.attr if head == "attr" else index.cap
            domain, name = read[1], read[2]
            if name is None:
                frozen_key = (head, domain)
                frozen = index.frozen.get(frozen_key)
                if frozen is None:
                    frozen = (_frozen({d: _frozen(m) for d, m in maps.items()}) if domain is None
                              else _frozen(maps.get(domain, {})))
                    index.frozen[frozen_key] = frozen
                values.append(frozen)
            else:
                values.append(maps.get(domain, {}).get(name, _MISSING))
    return tuple(values)
