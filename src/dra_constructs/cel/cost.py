"""Worst-case cost estimate of a checked DRA selector, as the API server computes it.

Hand-written port of the *rules* of three Go estimators, because cel-cpp has no estimator with
Kubernetes' library costs:

* cel-go ``checker/cost.go`` (the generic estimator). Two generations: cel-go 0.22 (Kubernetes
  1.32) and cel-go >= 0.23 (1.33+), which also tracks sizes of bound, accumulator and iteration
  variables (``Target.cel_cost_tracks_local_sizes``);
* ``k8s.io/apiserver/pkg/cel/library/cost.go`` (``EstimateCallCost`` of the Kubernetes
  libraries);
* the ``sizeEstimator`` of ``k8s.io/dynamic-resource-allocation/cel/compile.go`` (maximum sizes
  of the ``device`` fields), absent in 1.32.0-1.32.2 (``Target.cel_cost_estimator_bug``).

Costs saturate at 2^64-1 like Go's uint64 arithmetic helpers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dra_constructs.cel import _astpb
from dra_constructs.target import Target

__all__ = ["MAX_UINT64", "estimate_cost"]

MAX_UINT64 = (1 << 64) - 1
_TWO_TO_64 = math.ldexp(1.0, 64)
_STRING_TRAVERSAL = 0.1
_REGEX_LENGTH = 0.25
_LIST_CREATE, _MAP_CREATE, _STRUCT_CREATE = 10, 30, 40
_ACCUMULATORS = ("@result", "__result__", "@__result__")
_K8S_STRUCTS = {"kubernetes.Quantity", "kubernetes.Semver", "kubernetes.URL", "kubernetes.NamedFormat"}
_OPAQUE = {"net.IP", "net.CIDR", "optional_type"}


def _add(x: int, y: int) -> int:
    return MAX_UINT64 if x + y > MAX_UINT64 else x + y


def _mul(x: int, y: int) -> int:
    return MAX_UINT64 if x * y > MAX_UINT64 else x * y


def _factor(x: int, y: float) -> int:
    xf = float(x)
    if xf > 0 and y > 0 and xf > float(MAX_UINT64) / y:
        return MAX_UINT64
    ceil = math.ceil(xf * y)
    return MAX_UINT64 if ceil >= _TWO_TO_64 else int(ceil)


class Est:
    """A (min, max) pair: a ``CostEstimate`` or a ``SizeEstimate`` (treated as immutable)."""

    __slots__ = ("max", "min")

    def __init__(self, low: int, high: int) -> None:
        self.min = low
        self.max = high

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Est) and (self.min, self.max) == (other.min, other.max)

    def __hash__(self) -> int:
        return hash((self.min, self.max))

    def __repr__(self) -> str:
        return f"Est({self.min}, {self.max})"

    def add(self, o: Est) -> Est:
        low, high = self.min + o.min, self.max + o.max
        return Est(low if low <= MAX_UINT64 else MAX_UINT64, high if high <= MAX_UINT64 else MAX_UINT64)

    def mul(self, o: Est) -> Est:
        return Est(_mul(self.min, o.min), _mul(self.max, o.max))

    def factor(self, f: float) -> Est:
        return Est(_factor(self.min, f), _factor(self.max, f))

    def union(self, o: Est) -> Est:
        return Est(min(self.min, o.min), max(self.max, o.max))


ZERO = Est(0, 0)
ONE = Est(1, 1)
UNKNOWN = Est(0, MAX_UINT64)


# --- types -------------------------------------------------------------------------------

def type_kind(t: Any) -> str:
    """cel-go ``types.Kind`` of a checked ``cel.expr.Type`` (only what the estimator asks)."""
    if t is None:
        return "dyn"
    which = t.WhichOneof("kind")
    if which == "primitive":
        return _astpb.PRIMITIVES.get(t.primitive, "dyn")
    if which == "well_known":
        return {2: "timestamp", 3: "duration"}.get(t.well_known, "any")
    if which == "list_type":
        return "list"
    if which == "map_type":
        return "map"
    if which == "message_type":
        return {"google.protobuf.Struct": "map", "google.protobuf.ListValue": "list",
                "google.protobuf.Value": "dyn", "google.protobuf.Any": "any"}.get(t.message_type, "struct")
    if which == "abstract_type":
        name = t.abstract_type.name
        if name in _OPAQUE:
            return "opaque"
        return "struct" if name in _K8S_STRUCTS or name.startswith("kubernetes.") else "opaque"
    if which == "type_param":
        return "type_param"
    if which == "wrapper":
        return _astpb.PRIMITIVES.get(t.wrapper, "dyn")
    return which or "dyn"


def _is_scalar(t: Any, with_optional: bool) -> bool:
    kind = type_kind(t)
    if kind in ("bool", "double", "duration", "int", "timestamp", "uint"):
        return True
    if with_optional and t is not None and t.WhichOneof("kind") == "abstract_type" \
            and t.abstract_type.name == "optional_type" and t.abstract_type.parameter_types:
        return _is_scalar(t.abstract_type.parameter_types[0], with_optional)
    return False


def _type_name(t: Any) -> str:
    if t is None:
        return ""
    which = t.WhichOneof("kind")
    if which == "abstract_type":
        return str(t.abstract_type.name)
    if which == "message_type":
        return str(t.message_type)
    return ""


# --- the DRA size estimator ----------------------------------------------------------------

@dataclass(frozen=True)
class _Decl:
    """A node of the DRA ``DeclType`` tree: fields, key/element types and ``MaxElements``."""

    max_elements: int
    fields: tuple[tuple[str, _Decl], ...] = ()
    key: _Decl | None = None
    elem: _Decl | None = None


_ATTRIBUTE = _Decl(64)  # any, DeviceAttributeMaxValueLength
_DOMAIN, _ID, _DRIVER = _Decl(63), _Decl(32), _Decl(63)
_INNER_ATTRS = _Decl(32, key=_ID, elem=_ATTRIBUTE)
_INNER_CAPACITY = _Decl(32, key=_ID, elem=_Decl(0))  # quantity: no MaxElements
_DEVICE_FIELDS = (("driver", _DRIVER), ("attributes", _Decl(32, key=_DOMAIN, elem=_INNER_ATTRS)),
                  ("capacity", _Decl(32, key=_DOMAIN, elem=_INNER_CAPACITY)))
_DEVICE_131 = _Decl(0, fields=_DEVICE_FIELDS)
_DEVICE_134 = _Decl(0, fields=(("allowMultipleAllocations", _Decl(1)), *_DEVICE_FIELDS))


def _dra_size(path: Sequence[str] | None, device: _Decl) -> Est | None:
    """``sizeEstimator.EstimateSize`` of dynamic-resource-allocation."""
    if not path or path[0] != "device":
        return None
    node = device
    for name in path[1:]:
        if name in ("@items", "@values"):
            if node.elem is None:
                return None
            node = node.elem
        elif name == "@keys":
            if node.key is None:
                return None
            node = node.key
        else:
            found = dict(node.fields).get(name)
            if found is None:
                if node.elem is _ATTRIBUTE:
                    node = _ATTRIBUTE
                    continue
                return None
            node = found
    return Est(0, node.max_elements)


# --- the estimator ---------------------------------------------------------------------------

def _sum(costs: list[Est]) -> Est:
    total = ZERO
    for cost in costs:
        total = total.add(cost)
    return total


class _Node:
    """cel-go ``AstNode`` (path, type, derived size), computed when first asked for."""

    __slots__ = ("_coster", "_path", "_size", "_sized", "expr", "type")

    def __init__(self, coster: _Coster | None, expr: Any, type_: Any,
                 path: list[str] | None = None, size: Est | None = None) -> None:
        self._coster = coster
        self.expr = expr
        self.type = type_
        self._path = path
        self._size = size
        self._sized = coster is None

    @property
    def path(self) -> list[str] | None:
        if self._coster is not None and self._path is None:
            path: list[str] | None = self._coster.get_path(self.expr)
            if path and path[0] in _ACCUMULATORS:
                path = None
            self._path = path if path is not None else []
        return self._path or None

    @property
    def size(self) -> Est | None:
        if not self._sized and self._coster is not None:
            self._size = self._coster.compute_size(self.expr)
            self._sized = True
        return self._size


@dataclass
class _Local:
    path: list[str]
    size: Est | None
    entry: tuple[str, Est, Est] | None


class _Coster:
    def __init__(self, checked: Any, target: Target) -> None:
        self.checked = checked
        self.v2 = target.cel_cost_tracks_local_sizes
        self.semver_costs = target.cel_cost_semver_functions
        self.size_estimator = not target.cel_cost_estimator_bug
        self.device = _DEVICE_134 if target.cel_has_allow_multiple_allocations else _DEVICE_131
        self.paths: dict[int, list[str]] = {}
        self.sizes: dict[int, Est] = {}
        self.entry_sizes: dict[int, tuple[str, Est, Est]] = {}
        self.iter_ranges: dict[str, list[Any]] = {}  # v1
        self.locals: dict[str, list[_Local]] = {}  # v2
        self.type_map = checked.type_map
        self.reference_map = checked.reference_map
        self.types: dict[int, Any] = {}

    # helpers
    def type_of(self, e: Any) -> Any:
        node_id = e.id
        try:
            return self.types[node_id]
        except KeyError:
            found = self.type_map.get(node_id, None)
            self.types[node_id] = found
            return found

    def overloads(self, e: Any) -> list[str]:
        ref = self.reference_map.get(e.id)
        return list(ref.overload_id) if ref is not None else []

    def estimator_size(self, path: list[str] | None) -> Est | None:
        return _dra_size(path, self.device) if self.size_estimator else None

    def get_path(self, e: Any) -> list[str]:
        if self.v2 and e.WhichOneof("kind") == "ident_expr":
            local = self._peek(e.ident_expr.name)
            if local is not None:
                return list(local.path)
        return list(self.paths.get(e.id, []))

    def _peek(self, name: str) -> _Local | None:
        stack = self.locals.get(name)
        return stack[-1] if stack else None

    @staticmethod
    def literal_size(e: Any) -> Est | None:
        kind = e.WhichOneof("kind")
        if kind == "const_expr":
            const = e.const_expr.WhichOneof("kind")
            if const == "string_value":
                n = len(e.const_expr.string_value)
            elif const == "bytes_value":
                n = len(e.const_expr.bytes_value)
            elif const is None:
                return None
            else:
                n = 1
            return Est(n, n)
        if kind == "list_expr":
            return Est(len(e.list_expr.elements), len(e.list_expr.elements))
        if kind == "struct_expr" and not e.struct_expr.message_name:
            return Est(len(e.struct_expr.entries), len(e.struct_expr.entries))
        return None

    def compute_size(self, e: Any) -> Est | None:
        """v2 ``computeSize``; v1 derived size (computed sizes and literals)."""
        if e.id in self.sizes:
            return self.sizes[e.id]
        literal = self.literal_size(e)
        if literal is not None:
            return literal
        if not self.v2:
            return None
        size = self.estimator_size(self.get_path(e))
        if size is not None:
            self.sizes[e.id] = size
            return size
        if _is_scalar(self.type_of(e), True):
            return ONE
        if e.WhichOneof("kind") == "ident_expr":
            local = self._peek(e.ident_expr.name)
            if local is not None and local.size is not None:
                return local.size
        return None

    def node(self, e: Any) -> _Node:
        return _Node(self, e, self.type_of(e))

    def size_of(self, node: _Node) -> Est:
        """cel-go's ``sizeEstimate`` (v1) / ``sizeOrUnknown`` (v2) of an AstNode."""
        if node.size is not None:
            return node.size
        if self.v2:
            return UNKNOWN
        size = self.estimator_size(node.path)
        if size is not None:
            return size
        return ONE if _is_scalar(node.type, False) else UNKNOWN

    def k8s_size(self, node: _Node) -> Est:
        """Kubernetes' ``CostEstimator.sizeEstimate``."""
        if node.size is not None:
            return node.size
        size = self.estimator_size(node.path)
        return size if size is not None else UNKNOWN

    # traversal
    def cost(self, e: Any) -> Est:
        kind = e.WhichOneof("kind")
        if kind == "call_expr":
            return self.cost_call(e)
        if kind == "const_expr":
            return ZERO
        if kind == "select_expr":
            return self.cost_select(e)
        if kind == "ident_expr":
            return self.cost_ident(e)
        if kind == "list_expr":
            return self.cost_list(e)
        if kind == "struct_expr":
            return self.cost_struct(e)
        if kind == "comprehension_expr":
            if self.v2 and self.is_bind(e):
                return self.cost_bind(e)
            return self.cost_comprehension(e)
        return ZERO

    def cost_ident(self, e: Any) -> Est:
        name = e.ident_expr.name
        if "." in name and name.startswith("device."):
            # cel-cpp folds the qualified name ``device.attributes`` into one identifier; cel-go
            # sees an identifier plus a field selection on an object (+1 per selection).
            parts = name.split(".")
            self.paths[e.id] = parts
            return Est(len(parts), len(parts))
        if self.v2:
            local = self._peek(name)
            self.paths[e.id] = list(local.path) if local is not None else [name]
        else:
            stack = self.iter_ranges.get(name)
            if stack:
                rng = stack[-1]
                rkind = type_kind(self.type_of(rng))
                if rkind == "list":
                    self.paths[e.id] = [*self.paths.get(rng.id, []), "@items"]
                elif rkind == "map":
                    self.paths[e.id] = [*self.paths.get(rng.id, []), "@keys"]
            else:
                self.paths[e.id] = [name]
        return ONE

    def cost_select(self, e: Any) -> Est:
        sel = e.select_expr
        if sel.test_only:
            return ZERO.add(self.cost(sel.operand))  # PresenceTestHasCost(false) in Kubernetes
        total = self.cost(sel.operand)
        if type_kind(self.type_of(sel.operand)) in ("map", "struct", "type_param"):
            total = total.add(ONE)
        self.paths[e.id] = [*self.get_path(sel.operand), sel.field]
        return total

    def cost_list(self, e: Any) -> Est:
        total = ZERO
        item = Est(MAX_UINT64, 0) if e.list_expr.elements else ZERO
        for element in e.list_expr.elements:
            total = total.add(self.cost(element))
            if self.v2:
                item = item.union(self.compute_size(element) or UNKNOWN)
        if self.v2:
            self.entry_sizes[e.id] = ("list", ONE, item)
        return total.add(Est(_LIST_CREATE, _LIST_CREATE))

    def cost_struct(self, e: Any) -> Est:
        total = ZERO
        if e.struct_expr.message_name:
            for entry in e.struct_expr.entries:
                total = total.add(self.cost(entry.value))
            return total.add(Est(_STRUCT_CREATE, _STRUCT_CREATE))
        key_size = Est(MAX_UINT64, 0) if e.struct_expr.entries else ZERO
        val_size = key_size
        for entry in e.struct_expr.entries:
            total = total.add(self.cost(entry.map_key)).add(self.cost(entry.value))
            if self.v2:
                key_size = key_size.union(self.compute_size(entry.map_key) or UNKNOWN)
                val_size = val_size.union(self.compute_size(entry.value) or UNKNOWN)
        if self.v2:
            self.entry_sizes[e.id] = ("map", key_size, val_size)
        return total.add(Est(_MAP_CREATE, _MAP_CREATE))

    def entry_size(self, e: Any) -> tuple[str, Est, Est] | None:
        if e.id in self.entry_sizes:
            return self.entry_sizes[e.id]
        if e.WhichOneof("kind") == "ident_expr":
            local = self._peek(e.ident_expr.name)
            if local is not None and local.entry is not None:
                return local.entry
        return None

    def push_local(self, name: str, e: Any) -> None:
        self.locals.setdefault(name, []).append(
            _Local(self.get_path(e), self.compute_size(e), self.entry_size(e)))

    def push_iter(self, name: str, rng: Any, which: str) -> None:
        entry = self.entry_size(rng)
        container = entry[0] if entry is not None else type_kind(self.type_of(rng))
        if which == "single":
            size: Est | None = entry[1] if entry is not None else None
            sub = "@keys"
            if container == "list":
                size, sub = (entry[2] if entry is not None else None), "@items"
        elif which == "key":
            size = entry[1] if entry is not None else None
            sub = "@indices" if container == "list" else "@keys"
        else:
            size = entry[2] if entry is not None else None
            sub = "@items" if container == "list" else "@values"
        self.locals.setdefault(name, []).append(_Local([*self.get_path(rng), sub], size, None))

    def pop_local(self, name: str) -> None:
        self.locals[name].pop()

    def is_bind(self, e: Any) -> bool:
        comp = e.comprehension_expr
        rng, cond = comp.iter_range, comp.loop_condition
        return (rng.WhichOneof("kind") == "list_expr" and not rng.list_expr.elements
                and cond.WhichOneof("kind") == "const_expr"
                and cond.const_expr.WhichOneof("kind") == "bool_value" and not cond.const_expr.bool_value
                and comp.accu_var not in _ACCUMULATORS)

    def cost_bind(self, e: Any) -> Est:
        comp = e.comprehension_expr
        total = self.cost(comp.iter_range).add(self.cost(comp.accu_init))
        self.push_local(comp.accu_var, comp.accu_init)
        total = total.add(self.cost(comp.result))
        self.pop_local(comp.accu_var)
        self._copy_sizes(e, comp.result)
        return total

    def _copy_sizes(self, dst: Any, src: Any) -> None:
        size = self.compute_size(src)
        if size is not None:
            self.sizes[dst.id] = size
        entry = self.entry_size(src)
        if entry is not None:
            self.entry_sizes[dst.id] = entry

    def cost_comprehension(self, e: Any) -> Est:
        comp = e.comprehension_expr
        total = self.cost(comp.iter_range).add(self.cost(comp.accu_init))
        if self.v2:
            self.push_local(comp.accu_var, comp.accu_init)
            if comp.iter_var2:
                self.push_iter(comp.iter_var, comp.iter_range, "key")
                self.push_iter(comp.iter_var2, comp.iter_range, "value")
            else:
                self.push_iter(comp.iter_var, comp.iter_range, "single")
        else:
            self.iter_ranges.setdefault(comp.iter_var, []).append(comp.iter_range)
        loop = self.cost(comp.loop_condition)
        step = self.cost(comp.loop_step)
        if self.v2:
            self.pop_local(comp.iter_var)
            if comp.iter_var2:
                self.pop_local(comp.iter_var2)
        else:
            self.iter_ranges[comp.iter_var].pop()
        total = total.add(self.cost(comp.result))
        if self.v2:
            self.pop_local(comp.accu_var)
            rng = self.compute_size(comp.iter_range) or UNKNOWN
        else:
            rng = self.size_of(self.node(comp.iter_range))
            self.sizes[e.id] = rng
        total = total.add(rng.mul(step.add(loop)))
        if self.v2:
            init_kind = comp.accu_init.WhichOneof("kind")
            if init_kind == "const_expr":
                literal = self.literal_size(comp.accu_init)
                if literal is not None:
                    self.sizes[e.id] = literal
            elif init_kind in ("list_expr", "struct_expr"):
                self.sizes[e.id] = rng
                step_entry = self.entry_size(comp.loop_step)
                if step_entry is not None:
                    self.entry_sizes[e.id] = step_entry
        return total

    def cost_call(self, e: Any) -> Est:
        call = e.call_expr
        if self.v2 and call.function == "dyn" and len(call.args) == 1:
            arg_cost = self.cost(call.args[0])
            self._copy_sizes(e, call.args[0])
            return ONE.add(arg_cost)
        arg_costs = [self.cost(a) for a in call.args]
        overloads = self.overloads(e)
        if not overloads:
            return ZERO
        # AstNodes only for calls whose price depends on sizes (most calls cost 1 + their arguments)
        priced = call.function in _K8S_PRICED or not _PRICED_OVERLOADS.isdisjoint(overloads)
        arg_nodes = [self.node(a) for a in call.args] if priced else []
        total = ZERO
        target: _Node | None = None
        if call.HasField("target"):
            total = total.add(self.cost(call.target))
            target = self.node(call.target) if priced else None
        fn = Est(MAX_UINT64, 0)
        result: Est | None = None
        for overload in overloads:
            if priced:
                est, size = self.function_cost(e, call.function, overload, target, arg_nodes, arg_costs)
            else:  # function_cost's common case, without building the nodes it would not read
                est, size = ONE.add(_sum(arg_costs)), None
            fn = fn.union(est)
            if size is not None:
                result = size if result is None else result.union(size)
            if overload in ("index_list", "index_map") and call.args:
                if self.v2:
                    entry = self.entry_size(call.args[0])
                    result = entry[2] if entry is not None else None
                sub = "@items" if overload == "index_list" else "@values"
                self.paths[e.id] = [*self.get_path(call.args[0]), sub]
            if self.v2 and result is None:
                result = self.compute_size(e)
        if result is not None:
            self.sizes[e.id] = result
        return total.add(fn)

    def function_cost(self, e: Any, function: str, overload: str, target: _Node | None,
                      args: list[_Node], arg_costs: list[Est]) -> tuple[Est, Est | None]:
        arg_sum = ZERO
        for cost in arg_costs:
            arg_sum = arg_sum.add(cost)
        k8s = self.k8s_call_cost(function, overload, target, args)
        if k8s is not None:
            return k8s[0].add(arg_sum), k8s[1]
        if overload not in _PRICED_OVERLOADS:  # the common case: one set lookup, not the chain below
            return ONE.add(arg_sum), None
        size = self.size_of
        if overload == "string_format" and target is not None:
            return size(target).factor(_STRING_TRAVERSAL).add(arg_sum), None
        if overload in ("string_to_bytes", "bytes_to_string") and len(args) == 1:
            sz = size(args[0])
            result = Est(sz.min, _mul(sz.max, 4)) if overload == "string_to_bytes" else Est(sz.min // 4, sz.max)
            return sz.factor(_STRING_TRAVERSAL).add(arg_sum), result
        if overload == "strings_quote" and len(args) == 1:
            sz = size(args[0])
            return sz.factor(_STRING_TRAVERSAL).add(arg_sum), Est(_add(sz.min, 2), _add(_mul(sz.max, 2), 2))
        if overload in ("starts_with_string", "ends_with_string") and len(args) == 1:
            return size(args[0]).factor(_STRING_TRAVERSAL).add(arg_sum), None
        if overload == "in_list" and len(args) == 2:
            return size(args[1]).factor(1).add(arg_sum), None
        if overload == "matches_string" and target is not None and len(args) == 1:
            str_cost = size(target).add(ONE).factor(_STRING_TRAVERSAL)
            regex_cost = size(args[0]).factor(_REGEX_LENGTH)
            return str_cost.mul(regex_cost).add(arg_sum), None
        if overload == "contains_string" and target is not None and len(args) == 1:
            str_cost = size(target).factor(_STRING_TRAVERSAL)
            sub_cost = size(args[0]).factor(_STRING_TRAVERSAL)
            return str_cost.mul(sub_cost).add(arg_sum), None
        if overload in ("logical_or", "logical_and"):
            lhs, rhs = arg_costs[0], arg_costs[1]
            return Est(lhs.min, lhs.add(rhs).max), None
        if overload == "conditional":
            result = size(args[1]).union(size(args[2]))
            if self.v2:
                a, b = self.entry_size(args[1].expr), self.entry_size(args[2].expr)
                if a is not None and b is not None:
                    self.entry_sizes[e.id] = (a[0], a[1].union(b[1]), a[2].union(b[2]))
            return arg_costs[0].add(arg_costs[1].union(arg_costs[2])), result
        if overload in ("add_string", "add_bytes", "add_list") and len(args) == 2:
            result = size(args[0]).add(size(args[1]))
            if self.v2:
                a, b = self.entry_size(args[0].expr), self.entry_size(args[1].expr)
                if a is not None and b is not None:
                    self.entry_sizes[e.id] = (a[0], a[1].union(b[1]), a[2].union(b[2]))
            if overload == "add_list":
                return ONE.add(arg_sum), result
            return result.factor(_STRING_TRAVERSAL).add(arg_sum), result
        if overload in _STRING_COMPARISONS and len(args) == 2:
            lhs, rhs = size(args[0]), size(args[1])
            smallest = min(lhs.max, rhs.max)
            return Est(1 if smallest > 0 else 0, smallest).factor(_STRING_TRAVERSAL).add(arg_sum), None
        return ONE.add(arg_sum), None

    # Kubernetes library costs (EstimateCallCost)
    def k8s_call_cost(self, function: str, overload: str, target: _Node | None,
                      args: list[_Node]) -> tuple[Est, Est | None] | None:
        if function not in _K8S_PRICED:  # most calls: one set lookup instead of the chain below
            return None
        size = self.k8s_size
        if function == "check":
            return Est(350000, 350000), None
        if function in _NOMINAL or (self.semver_costs and function in ("major", "minor", "patch")):
            return ONE, None
        if function in ("fieldSelector", "labelSelector") and len(args) == 1:
            length = size(args[0])
            parse = length.factor(_STRING_TRAVERSAL)
            requirements = length.factor(0.5).factor(float(_LIST_CREATE + _STRUCT_CREATE))
            return Est(_LIST_CREATE, _LIST_CREATE).add(parse).add(requirements), None
        if function in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf") and target is not None:
            elem = self.list_element(target)
            if elem is not None:
                el_cost = ONE
                if type_kind(elem.type) in ("string", "bytes"):
                    el_cost = el_cost.add(size(elem).factor(_STRING_TRAVERSAL))
                return size(target).mul(el_cost), None
            return size(target).factor(_STRING_TRAVERSAL), None
        if function == "url" and len(args) == 1:
            sz = size(args[0])
            return sz.factor(_STRING_TRAVERSAL), sz
        if function in ("lowerAscii", "upperAscii", "substring", "trim") and target is not None:
            sz = size(target)
            return sz.factor(_STRING_TRAVERSAL), sz
        if function == "replace" and target is not None and len(args) >= 2:
            return self.replace_cost(size(target), size(args[0]), size(args[1]))
        if function == "split" and target is not None:
            sz = size(target)
            high = sz.max
            if len(args) > 1:
                limit = args[1].expr
                if limit.WhichOneof("kind") == "const_expr" and limit.const_expr.WhichOneof("kind") == "int64_value":
                    high = limit.const_expr.int64_value % (1 << 64)
            return sz.factor(2 * _STRING_TRAVERSAL), Est(0, high)
        if function == "join" and target is not None:
            list_size = size(target)
            result = ZERO
            elem = self.list_element(target)
            if elem is not None:
                result = list_size.mul(size(elem))
            if args:
                separators = Est(max(list_size.min - 1, 0), max(list_size.max - 1, 0))
                result = result.add(size(args[0]).mul(separators))
            return result.factor(_STRING_TRAVERSAL), result
        if function in ("find", "findAll") and target is not None and args:
            sz = size(target)
            str_cost = sz.add(ONE).factor(_STRING_TRAVERSAL)
            regex_cost = size(args[0]).factor(_REGEX_LENGTH)
            return str_cost.mul(regex_cost), Est(0, sz.max)
        if function in ("cidr", "isIP", "isCIDR") and args:
            return size(args[0]).factor(_STRING_TRAVERSAL), None
        if function == "ip":
            if overload == "cidr_ip":
                return ONE, None
            if args:
                return size(args[0]).factor(_STRING_TRAVERSAL), None
        if function == "ip.isCanonical" and args:
            return size(args[0]).factor(2 * _STRING_TRAVERSAL), None
        if function in ("containsIP", "containsCIDR") and target is not None and args:
            ip_size = Est(4, 16)
            cost = ip_size.add(ip_size).factor(_STRING_TRAVERSAL)
            if function == "containsCIDR":
                cost = cost.add(ip_size.factor(_STRING_TRAVERSAL)).add(ONE)
            if overload in ("cidr_contains_ip_string", "cidr_contains_cidr_string"):
                cost = cost.add(size(args[0]).factor(_STRING_TRAVERSAL))
            return cost, None
        quantity_like = ("quantity", "isQuantity") + (("semver", "isSemver") if self.semver_costs else ())
        if function in quantity_like and args:
            return size(args[0]).factor(_STRING_TRAVERSAL), None
        if function == "validate" and args:
            return size(args[0]).factor(_STRING_TRAVERSAL).factor(64 * _REGEX_LENGTH), None
        if function == "_==_" and len(args) == 2:
            lhs, rhs = args
            if _same_type(lhs.type, rhs.type):
                name = _type_name(lhs.type)
                if name in ("net.IP", "net.CIDR", "kubernetes.Quantity", "kubernetes.Semver") \
                        or name.startswith("kubernetes.authorization."):
                    return ONE, None
                if name == "kubernetes.NamedFormat":
                    return Est(1, 64).factor(_STRING_TRAVERSAL), None
                if name == "kubernetes.URL":
                    url_size = ONE
                    if rhs.size is not None:
                        url_size = rhs.size.union(rhs.size)
                    return Est(1, url_size.max).factor(_STRING_TRAVERSAL), None
        return None

    @staticmethod
    def replace_cost(sz: Est, to_replace: Est, replace_with: Est) -> tuple[Est, Est]:
        count_max = count_min = retained_max = retained_min = 0
        if to_replace.min == 0:
            count_max = sz.max + 1 if sz.max < MAX_UINT64 else sz.max
            retained_max = sz.max
        elif replace_with.max <= to_replace.min:
            retained_max = sz.max
        else:
            count_max = math.ceil(sz.max / to_replace.min)
        if to_replace.max == 0:
            count_min = sz.min + 1 if sz.min < MAX_UINT64 else sz.min
            retained_min = sz.min
        elif to_replace.max <= replace_with.min:
            retained_min = sz.min
        else:
            count_min = math.ceil(sz.min / to_replace.max)
        result = Est(count_min, count_max).mul(replace_with).add(Est(retained_min, retained_max))
        return sz.factor(2 * _STRING_TRAVERSAL), result

    def list_element(self, node: _Node) -> _Node | None:
        t = node.type
        if t is None or t.WhichOneof("kind") != "list_type":
            return None
        path = None if node.path is None else [*node.path, "@items"]
        return _Node(None, None, t.list_type.elem_type, path, None)


_NOMINAL = {
    "serviceAccount", "path", "group", "resource", "subresource", "namespace", "name", "allowed", "reason",
    "error", "errored", "masked", "prefixLength", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast",
    "isLinkLocalUnicast", "isGlobalUnicast", "format.named", "sign", "asInteger", "isInteger", "asApproximateFloat",
    "isGreaterThan", "isLessThan", "compareTo", "add", "sub", "getScheme", "getHostname", "getHost", "getPort",
    "getEscapedPath", "getQuery",
}
#: Every overload ``function_cost`` prices specially (all others cost 1 plus their arguments).
_PRICED_OVERLOADS = frozenset({
    "string_format", "string_to_bytes", "bytes_to_string", "strings_quote", "starts_with_string",
    "ends_with_string", "in_list", "matches_string", "contains_string", "logical_or", "logical_and", "conditional",
    "add_string", "add_bytes", "add_list",
}) | frozenset({
    "less_string", "greater_string", "less_equals_string", "greater_equals_string", "less_bytes", "greater_bytes",
    "less_equals_bytes", "greater_equals_bytes", "equals", "not_equals",
})
#: Every function ``k8s_call_cost`` prices (anything else falls through to cel-go's own costs).
_K8S_PRICED = frozenset(_NOMINAL | {
    "check", "major", "minor", "patch", "fieldSelector", "labelSelector", "isSorted", "sum", "max", "min",
    "indexOf", "lastIndexOf", "url", "lowerAscii", "upperAscii", "substring", "trim", "replace", "split", "join",
    "find", "findAll", "cidr", "isIP", "isCIDR", "ip", "ip.isCanonical", "containsIP", "containsCIDR", "quantity",
    "isQuantity", "semver", "isSemver", "validate", "_==_",
})
_STRING_COMPARISONS = {
    "less_string", "greater_string", "less_equals_string", "greater_equals_string", "less_bytes", "greater_bytes",
    "less_equals_bytes", "greater_equals_bytes", "equals", "not_equals",
}


def _same_type(a: Any, b: Any) -> bool:
    return a is not None and b is not None and a.SerializeToString() == b.SerializeToString()


def estimate_cost(checked: Any, target: Target) -> int:
    """The worst-case cost (``MaxCost``) the API server compares with 1,000,000."""
    return _Coster(checked, target).cost(checked.expr).max
