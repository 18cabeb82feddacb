"""Rewriting a checked AST where Kubernetes' cel-go runtime differs from plain CEL (Go equality,
the unknown-domain mapper, library calls renamed to their Python overloads).
"""

from __future__ import annotations

from typing import Any

from dra_constructs.cel import _astpb
from dra_constructs.cel._runtime_env import _MAP_INSERT, RENAMED_FUNCTIONS, RENAMED_OVERLOADS

# --- AST rewriting -----------------------------------------------------------------------------

def _is_simple(t: Any) -> bool:
    """A type whose plain-CEL equality equals cel-go's (no Kubernetes type can hide in it)."""
    if t is None:
        return False
    kind = t.WhichOneof("kind")
    if kind in ("primitive", "null", "well_known", "wrapper", "type"):
        return bool(kind != "well_known" or t.well_known != 1)
    if kind == "list_type":
        return _is_simple(t.list_type.elem_type)
    if kind == "map_type":
        return _is_simple(t.map_type.key_type) and _is_simple(t.map_type.value_type)
    return False


_PRIMITIVE_CONSTANTS = frozenset({"bool_value", "double_value", "int64_value", "string_value", "uint64_value"})


def _constant_primitive_list(e: Any) -> bool:
    """A non-empty list literal of bool/int/uint/double/string constants (cel-go makes it a set)."""
    elements = e.list_expr.elements if e.WhichOneof("kind") == "list_expr" else []
    return bool(elements) and not e.list_expr.optional_indices and all(
        el.WhichOneof("kind") == "const_expr" and el.const_expr.WhichOneof("kind") in _PRIMITIVE_CONSTANTS
        for el in elements)


#: Calls whose result is an optional (then possibly seen through ``dyn``).
_OPTIONAL_SOURCES = frozenset({"_[?_]", "_?._", "optional.of", "optional.ofNonZeroValue", "optional.none", "or",
                               "first", "last", "optMap", "optFlatMap"})


def _holds_optional(t: Any) -> bool:
    """Can a value of checked type ``t`` be, or contain, an optional?"""
    if t is None:
        return False
    kind = t.WhichOneof("kind")
    if kind == "abstract_type":
        return t.abstract_type.name == "optional_type" or any(_holds_optional(p)
                                                               for p in t.abstract_type.parameter_types)
    if kind == "list_type":
        return _holds_optional(t.list_type.elem_type)
    if kind == "map_type":
        return _holds_optional(t.map_type.key_type) or _holds_optional(t.map_type.value_type)
    return False


def _kind(t: Any) -> str | None:
    return None if t is None else t.WhichOneof("kind")


def _is_device_map(t: Any) -> bool:
    """``map(string, map(string, dyn|Quantity))``: the type of ``device.attributes``/``capacity``."""
    if t is None or t.WhichOneof("kind") != "map_type":
        return False
    inner = t.map_type.value_type
    if inner.WhichOneof("kind") != "map_type":
        return False
    value = inner.map_type.value_type
    return bool(value.WhichOneof("kind") == "dyn" or (
        value.WhichOneof("kind") == "abstract_type" and value.abstract_type.name == "kubernetes.Quantity"))


class _Rewriter:
    def __init__(self, checked: Any) -> None:
        self.checked = checked
        self.types = checked.type_map
        self.next_id: int = max([0, *checked.type_map.keys(), *checked.reference_map.keys(),
                                 *checked.source_info.positions.keys()]) + 1

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def type_of(self, e: Any) -> Any:
        return self.types.get(e.id, None)

    def rename(self, e: Any, function: str) -> None:
        e.call_expr.function = function
        if e.id in self.checked.reference_map:
            del self.checked.reference_map[e.id]

    def fresh(self, e: Any) -> Any:
        """A copy of subtree ``e`` with new node ids (ids must stay unique)."""
        copy = _astpb.Expr()
        copy.CopyFrom(e)
        stack = [copy]
        while stack:
            node = stack.pop()
            node.id = self.new_id()
            kind = node.WhichOneof("kind")
            if kind == "select_expr":
                stack.append(node.select_expr.operand)
            elif kind == "call_expr":
                if node.call_expr.HasField("target"):
                    stack.append(node.call_expr.target)
                stack.extend(node.call_expr.args)
            elif kind == "list_expr":
                stack.extend(node.list_expr.elements)
            elif kind == "struct_expr":
                for entry in node.struct_expr.entries:
                    entry.id = self.new_id()
                    if entry.HasField("map_key"):
                        stack.append(entry.map_key)
                    stack.append(entry.value)
            elif kind == "comprehension_expr":
                c = node.comprehension_expr
                stack.extend([c.iter_range, c.accu_init, c.loop_condition, c.loop_step, c.result])
        return copy

    def domain_lookup(self, operand: Any, key: Any) -> Any:
        """``key in operand ? operand[key] : {}`` (the DRA mapper, in plain CEL: no callback)."""
        test = _astpb.Expr()
        test.id = self.new_id()
        test.call_expr.function = "@in"
        test.call_expr.args.add().CopyFrom(self.fresh(key))
        test.call_expr.args.add().CopyFrom(self.fresh(operand))
        index = _astpb.Expr()
        index.id = self.new_id()
        index.call_expr.function = "_[_]"
        index.call_expr.args.add().CopyFrom(self.fresh(operand))
        index.call_expr.args.add().CopyFrom(self.fresh(key))
        empty = _astpb.Expr()
        empty.id = self.new_id()
        empty.struct_expr.SetInParent()
        node = _astpb.Expr()
        node.id = self.new_id()
        node.call_expr.function = "_?_:_"
        for part in (test, index, empty):
            node.call_expr.args.add().CopyFrom(part)
        return node

    def domain_call(self, e: Any, operand: Any, key: Any) -> None:
        """Turn node ``e`` into the mapper lookup ``operand[key]`` with an empty-map default."""
        node_id = e.id
        replacement = self.domain_lookup(operand, key)
        e.CopyFrom(replacement)
        e.id = node_id
        if node_id in self.checked.reference_map:
            del self.checked.reference_map[node_id]

    def const_string(self, text: str) -> Any:
        node = _astpb.Expr()
        node.id = self.new_id()
        node.const_expr.string_value = text
        return node

    def may_be_optional(self, e: Any) -> bool:
        """Can ``e`` be, or hold, an optional at run time? (Passing one to Python crashes cel_expr_python.)

        By its type, or, for a ``dyn`` value, by an optional-producing call inside it.
        """
        if _holds_optional(self.type_of(e)):
            return True
        stack = [e]
        while stack:
            node = stack.pop()
            kind = node.WhichOneof("kind")
            if kind == "call_expr":
                if node.call_expr.function in _OPTIONAL_SOURCES:
                    return True
                if node.call_expr.HasField("target"):
                    stack.append(node.call_expr.target)
                stack.extend(node.call_expr.args)
            elif kind == "select_expr":
                stack.append(node.select_expr.operand)
            elif kind == "list_expr":
                stack.extend(node.list_expr.elements)
            elif kind == "struct_expr":
                stack.extend(entry.value for entry in node.struct_expr.entries)
            elif kind == "comprehension_expr":
                comp = node.comprehension_expr
                stack.extend((comp.iter_range, comp.accu_init, comp.loop_step, comp.result))
        return False

    def overloads(self, e: Any) -> list[str]:
        ref = self.checked.reference_map.get(e.id)
        return list(ref.overload_id) if ref is not None else []

    def call(self, function: str, *args: Any) -> Any:
        node = _astpb.Expr()
        node.id = self.new_id()
        node.call_expr.function = function
        for arg in args:
            node.call_expr.args.add().CopyFrom(arg)
        return node

    def rename_library_call(self, e: Any) -> bool:
        """Library calls that run as Python functions here (cel-cpp lacks or differs from them)."""
        call = e.call_expr
        ids = self.overloads(e)
        if call.function == "validate" and ids == ["format-validate"]:
            # fmt.validate(s) -> k8s_format_ok(fmt, s) ? optional.none() : optional.of(k8s_format_errors(fmt, s))
            fmt, text = call.target, call.args[0]
            test = self.call("k8s_format_ok", self.fresh(fmt), self.fresh(text))
            errors = self.call("optional.of", self.call("k8s_format_errors", self.fresh(fmt), self.fresh(text)))
            node_id = e.id
            e.CopyFrom(self.call("_?_:_", test, self.call("optional.none"), errors))
            e.id = node_id
            self.checked.reference_map.pop(node_id, None)
            return True
        operands = ([call.target] if call.HasField("target") else []) + list(call.args)
        if any(self.may_be_optional(operand) for operand in operands):
            return False  # cel_expr_python crashes on an optional passed to Python: leave it to cel-cpp
        if call.function == _MAP_INSERT:
            self.rename(e, "k8s_map_insert")
            return True
        renamed = {RENAMED_OVERLOADS.get(i, "") for i in ids}
        if len(renamed) == 1 and "" not in renamed:
            self.rename(e, renamed.pop())
            return True
        if call.function in RENAMED_FUNCTIONS and call.HasField("target"):
            self.rename(e, RENAMED_FUNCTIONS[call.function])
            return True
        return False

    def visit(self, e: Any) -> None:
        kind = e.WhichOneof("kind")
        if kind == "select_expr":
            self.visit(e.select_expr.operand)
            operand = e.select_expr.operand
            if _is_device_map(self.type_of(operand)):
                if e.select_expr.test_only:
                    e.ClearField("select_expr")
                    e.const_expr.bool_value = True
                else:
                    operand_copy = _astpb.Expr()
                    operand_copy.CopyFrom(operand)
                    self.domain_call(e, operand_copy, self.const_string(e.select_expr.field))
        elif kind == "call_expr":
            call = e.call_expr
            if call.HasField("target"):
                self.visit(call.target)
            for arg in call.args:
                self.visit(arg)
            function, args = call.function, call.args
            if self.rename_library_call(e):
                return
            if any(self.may_be_optional(arg) for arg in args):
                pass  # optionals never go to Python (cel_expr_python crashes): cel-cpp's own semantics
            elif function in ("_==_", "_!=_") and len(args) == 2 and not (
                    _is_simple(self.type_of(args[0])) and _is_simple(self.type_of(args[1]))):
                self.rename(e, "k8s.eq" if function == "_==_" else "k8s.ne")
            elif function == "@in" and len(args) == 2 and not _is_simple(self.type_of(args[0])) \
                    and _constant_primitive_list(args[1]):
                self.rename(e, "k8s.in_set")
            elif function == "@in" and len(args) == 2 and not _is_simple(self.type_of(args[1])) \
                    and _kind(self.type_of(args[1])) != "map_type":  # map membership is by key: unchanged
                self.rename(e, "k8s.in")
            elif function == "_[_]" and len(args) == 2 and _is_device_map(self.type_of(args[0])):
                operand, key = _astpb.Expr(), _astpb.Expr()
                operand.CopyFrom(args[0])
                key.CopyFrom(args[1])
                self.domain_call(e, operand, key)
            elif function in ("_[?_]", "_?._") and len(args) == 2 and _is_device_map(self.type_of(args[0])):
                inner = self.domain_lookup(args[0], args[1])
                wrapper = _astpb.Expr()
                wrapper.id = e.id
                wrapper.call_expr.function = "optional.of"
                wrapper.call_expr.args.add().CopyFrom(inner)
                e.CopyFrom(wrapper)
                if e.id in self.checked.reference_map:
                    del self.checked.reference_map[e.id]
        elif kind == "list_expr":
            for element in e.list_expr.elements:
                self.visit(element)
        elif kind == "struct_expr":
            for entry in e.struct_expr.entries:
                if entry.HasField("map_key"):
                    self.visit(entry.map_key)
                self.visit(entry.value)
        elif kind == "comprehension_expr":
            comp = e.comprehension_expr
            for part in (comp.iter_range, comp.accu_init, comp.loop_condition, comp.loop_step, comp.result):
                self.visit(part)


def rewrite(checked: Any) -> Any:
    """A copy of ``checked`` with the Kubernetes runtime semantics wired in."""
    copy = _astpb.CheckedExpr()
    copy.CopyFrom(checked)
    _Rewriter(copy).visit(copy.expr)
    return copy
