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

Costs saturate at 2^64-1 like Go's uint64 arithmetic helpers (``_costmath``); the Kubernetes
library prices are in ``_costlib``. The estimator walks the light tree of ``_tree`` (decoded once
per expression), not the protobuf messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dra_constructs.cel import _tree
from dra_constructs.cel._costlib import (
    ACCUMULATORS,
    K8S_PRICED,
    LIST_CREATE,
    MAP_CREATE,
    PRICED_OVERLOADS,
    REGEX_LENGTH,
    STRING_COMPARISONS,
    STRING_TRAVERSAL,
    STRUCT_CREATE,
    AstNode,
    k8s_call_cost,
)
from dra_constructs.cel._costmath import (
    DEVICE_131,
    DEVICE_134,
    MAX_UINT64,
    ONE,
    UNKNOWN,
    ZERO,
    Est,
    dra_size,
    is_scalar,
    sat_add,
    sat_mul,
    type_kind,
)
from dra_constructs.target import Target

_LITERALS = frozenset({"const_expr", "list_expr", "struct_expr"})


@dataclass
class _Local:
    path: list[str]
    size: Est | None
    entry: tuple[str, Est, Est] | None


class _Coster:
    def __init__(self, target: Target) -> None:
        self.v2 = target.cel_cost_tracks_local_sizes
        self.semver_costs = target.cel_cost_semver_functions
        self.size_estimator = not target.cel_cost_estimator_bug
        self.device = DEVICE_134 if target.cel_has_allow_multiple_allocations else DEVICE_131
        self.paths: dict[int, list[str]] = {}
        self.sizes: dict[int, Est] = {}
        self.entry_sizes: dict[int, tuple[str, Est, Est]] = {}
        self.iter_ranges: dict[str, list[Any]] = {}  # v1
        self.locals: dict[str, list[_Local]] = {}  # v2

    # helpers
    def estimator_size(self, path: list[str] | None) -> Est | None:
        return dra_size(path, self.device) if self.size_estimator else None

    def get_path(self, e: Any) -> list[str]:
        if self.v2 and e.kind == "ident_expr":
            local = self._peek(e.name)
            if local is not None:
                return list(local.path)
        return list(self.paths.get(e.id, []))

    def _peek(self, name: str) -> _Local | None:
        stack = self.locals.get(name)
        return stack[-1] if stack else None

    @staticmethod
    def literal_size(e: Any) -> Est | None:
        kind = e.kind
        if kind == "const_expr":
            const = e.const_kind
            if const == "string_value" or const == "bytes_value":
                n = len(e.value)
            elif const is None:
                return None
            else:
                n = 1
            return Est(n, n)
        if kind == "list_expr":
            return Est(len(e.elements), len(e.elements))
        if kind == "struct_expr" and not e.message_name:
            return Est(len(e.entries), len(e.entries))
        return None

    def compute_size(self, e: Any) -> Est | None:
        """v2 ``computeSize``; v1 derived size (computed sizes and literals)."""
        known = self.sizes.get(e.id)
        if known is not None:
            return known
        kind = e.kind
        if kind in _LITERALS:
            literal = self.literal_size(e)
            if literal is not None:
                return literal
        if not self.v2:
            return None
        if self.size_estimator:  # estimator_size(get_path(e)), without copying a node's path
            path = self.get_path(e) if kind == "ident_expr" else self.paths.get(e.id)
            size = dra_size(path, self.device) if path else None
            if size is not None:
                self.sizes[e.id] = size
                return size
        if is_scalar(e.type, True):
            return ONE
        if kind == "ident_expr":
            local = self._peek(e.name)
            if local is not None and local.size is not None:
                return local.size
        return None

    def node(self, e: Any) -> AstNode:
        return AstNode(self, e, e.type)

    def size_of(self, node: AstNode) -> Est:
        """cel-go's ``sizeEstimate`` (v1) / ``sizeOrUnknown`` (v2) of an AstNode."""
        if node.size is not None:
            return node.size
        if self.v2:
            return UNKNOWN
        size = self.estimator_size(node.path)
        if size is not None:
            return size
        return ONE if is_scalar(node.type, False) else UNKNOWN

    def k8s_size(self, node: AstNode) -> Est:
        """Kubernetes' ``CostEstimator.sizeEstimate``."""
        if node.size is not None:
            return node.size
        size = self.estimator_size(node.path)
        return size if size is not None else UNKNOWN

    # traversal
    def cost(self, e: Any) -> Est:
        kind = e.kind
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
        name = e.name
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
                rkind = type_kind(rng.type)
                if rkind == "list":
                    self.paths[e.id] = [*self.paths.get(rng.id, []), "@items"]
                elif rkind == "map":
                    self.paths[e.id] = [*self.paths.get(rng.id, []), "@keys"]
            else:
                self.paths[e.id] = [name]
        return ONE

    def cost_select(self, e: Any) -> Est:
        sel = e
        if sel.test_only:
            return ZERO.add(self.cost(sel.operand))  # PresenceTestHasCost(false) in Kubernetes
        total = self.cost(sel.operand)
        if type_kind(sel.operand.type) in ("map", "struct", "type_param"):
            total = total.add(ONE)
        self.paths[e.id] = [*self.get_path(sel.operand), sel.field]
        return total

    def cost_list(self, e: Any) -> Est:
        total = ZERO
        item = Est(MAX_UINT64, 0) if e.elements else ZERO
        for element in e.elements:
            total = total.add(self.cost(element))
            if self.v2:
                item = item.union(self.compute_size(element) or UNKNOWN)
        if self.v2:
            self.entry_sizes[e.id] = ("list", ONE, item)
        return total.add(Est(LIST_CREATE, LIST_CREATE))

    def cost_struct(self, e: Any) -> Est:
        total = ZERO
        if e.message_name:
            for entry in e.entries:
                total = total.add(self.cost(entry.value))
            return total.add(Est(STRUCT_CREATE, STRUCT_CREATE))
        key_size = Est(MAX_UINT64, 0) if e.entries else ZERO
        val_size = key_size
        for entry in e.entries:
            total = total.add(self.cost(entry.map_key)).add(self.cost(entry.value))
            if self.v2:
                key_size = key_size.union(self.compute_size(entry.map_key) or UNKNOWN)
                val_size = val_size.union(self.compute_size(entry.value) or UNKNOWN)
        if self.v2:
            self.entry_sizes[e.id] = ("map", key_size, val_size)
        return total.add(Est(MAP_CREATE, MAP_CREATE))

    def entry_size(self, e: Any) -> tuple[str, Est, Est] | None:
        if e.id in self.entry_sizes:
            return self.entry_sizes[e.id]
        if e.kind == "ident_expr":
            local = self._peek(e.name)
            if local is not None and local.entry is not None:
                return local.entry
        return None

    def push_local(self, name: str, e: Any) -> None:
        self.locals.setdefault(name, []).append(
            _Local(self.get_path(e), self.compute_size(e), self.entry_size(e)))

    def push_iter(self, name: str, rng: Any, which: str) -> None:
        entry = self.entry_size(rng)
        container = entry[0] if entry is not None else type_kind(rng.type)
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
        comp = e
        rng, cond = comp.iter_range, comp.loop_condition
        return (rng.kind == "list_expr" and not rng.elements
                and cond.kind == "const_expr" and cond.const_kind == "bool_value" and not cond.value
                and comp.accu_var not in ACCUMULATORS)

    def cost_bind(self, e: Any) -> Est:
        comp = e
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
        comp = e
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
            init_kind = comp.accu_init.kind
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
        call = e
        if self.v2 and call.function == "dyn" and len(call.args) == 1:
            arg_cost = self.cost(call.args[0])
            self._copy_sizes(e, call.args[0])
            return ONE.add(arg_cost)
        # a literal costs nothing and records nothing: no call for it (most arguments are literals)
        arg_costs = [ZERO if a.kind == "const_expr" else self.cost(a) for a in call.args]
        overloads = e.overloads
        if not overloads:
            return ZERO
        # AstNodes only for calls whose price depends on sizes (most calls cost 1 + their arguments)
        priced = call.function in K8S_PRICED or not PRICED_OVERLOADS.isdisjoint(overloads)
        arg_nodes = [self.node(a) for a in call.args] if priced else []
        total: Est | None = None  # the receiver's cost (an Est is never changed in place)
        target: AstNode | None = None
        if call.target is not None:
            total = self.cost(call.target)
            target = self.node(call.target) if priced else None
        fn = Est(MAX_UINT64, 0)
        result: Est | None = None
        if not priced:  # function_cost's common case (1 + the arguments), without the nodes it would not read
            low = high = 1
            for arg_cost in arg_costs:
                low += arg_cost.min
                high += arg_cost.max
            # the same estimate for every overload, so their union is that estimate
            fn = Est(low if low <= MAX_UINT64 else MAX_UINT64, high if high <= MAX_UINT64 else MAX_UINT64)
        for overload in overloads:
            if priced:
                est, size = self.function_cost(e, call.function, overload, target, arg_nodes, arg_costs)
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
        return fn if total is None else total.add(fn)

    def function_cost(self, e: Any, function: str, overload: str, target: AstNode | None,
                      args: list[AstNode], arg_costs: list[Est]) -> tuple[Est, Est | None]:
        low = high = 0
        for cost in arg_costs:  # the saturating sum, saturated once (every term is non-negative)
            low += cost.min
            high += cost.max
        arg_sum = Est(low if low <= MAX_UINT64 else MAX_UINT64, high if high <= MAX_UINT64 else MAX_UINT64)
        k8s = k8s_call_cost(self, function, overload, target, args)
        if k8s is not None:
            return k8s[0].add(arg_sum), k8s[1]
        if overload not in PRICED_OVERLOADS:  # the common case: one set lookup, not the chain below
            return ONE.add(arg_sum), None
        size = self.size_of
        if overload == "string_format" and target is not None:
            return size(target).factor(STRING_TRAVERSAL).add(arg_sum), None
        if overload in ("string_to_bytes", "bytes_to_string") and len(args) == 1:
            sz = size(args[0])
            result = Est(sz.min, sat_mul(sz.max, 4)) if overload == "string_to_bytes" else Est(sz.min // 4, sz.max)
            return sz.factor(STRING_TRAVERSAL).add(arg_sum), result
        if overload == "strings_quote" and len(args) == 1:
            sz = size(args[0])
            return sz.factor(STRING_TRAVERSAL).add(arg_sum), Est(sat_add(sz.min, 2), sat_add(sat_mul(sz.max, 2), 2))
        if overload in ("starts_with_string", "ends_with_string") and len(args) == 1:
            return size(args[0]).factor(STRING_TRAVERSAL).add(arg_sum), None
        if overload == "in_list" and len(args) == 2:
            return size(args[1]).factor(1).add(arg_sum), None
        if overload == "matches_string" and target is not None and len(args) == 1:
            str_cost = size(target).add(ONE).factor(STRING_TRAVERSAL)
            regex_cost = size(args[0]).factor(REGEX_LENGTH)
            return str_cost.mul(regex_cost).add(arg_sum), None
        if overload == "contains_string" and target is not None and len(args) == 1:
            str_cost = size(target).factor(STRING_TRAVERSAL)
            sub_cost = size(args[0]).factor(STRING_TRAVERSAL)
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
            return result.factor(STRING_TRAVERSAL).add(arg_sum), result
        if overload in STRING_COMPARISONS and len(args) == 2:
            lhs, rhs = size(args[0]), size(args[1])
            smallest = min(lhs.max, rhs.max)
            return Est(1 if smallest > 0 else 0, smallest).factor(STRING_TRAVERSAL).add(arg_sum), None
        return ONE.add(arg_sum), None

    # Kubernetes library costs (EstimateCallCost)


def estimate_cost(checked: Any, target: Target, tree: _tree.Tree | None = None) -> int:
    """The worst-case cost (``MaxCost``) the API server compares with 1,000,000.

    ``tree``: the light tree of ``checked`` when the caller decoded it already.
    """
    return _Coster(target).cost((tree if tree is not None else _tree.decode(checked)).root).max
