"""cel-go's view of the types of a checked selector, where it differs from cel-cpp's.

The DRA compiler declares attribute values as ``any`` (``apiservercel.AnyType``): the inner
map of ``device.attributes`` is ``map(string, any)``. cel-cpp has no such type, so ``_env``
declares ``dyn`` there, and the two checkers then disagree where cel-go treats ``any``
differently from ``dyn``:

* a comprehension over an ``any`` value is an error (``expression of type 'any' cannot be range
  of a comprehension (must be list, map, or dynamic)``);
* the ``format`` validator accepts ``dyn`` for every clause, ``any`` for none;
* the result must be ``bool`` or ``any``: ``dyn`` is rejected;
* homogeneous-literal messages name ``any``.

:func:`go_types` re-derives the types cel-go's checker gives (``checker/checker.go``): an
attribute read is ``any``; identity-like operations (a ``cel.bind`` or comprehension variable,
the first branch of ``?:``, list and map literals, optionals) pass it on; selecting from or
indexing into ``any`` gives ``dyn``; a function result keeps its declared type. Every other node
keeps cel-cpp's type.
"""

from __future__ import annotations

import re
from typing import Any

from dra_constructs.cel import _astpb
from dra_constructs.cel._tree import Tree

__all__ = ["ANY_RANGE", "GoTypes", "go_types", "is_any", "type_name"]

ANY_RANGE = "expression of type '{}' cannot be range of a comprehension (must be list, map, or dynamic)"


def _t(**kind: Any) -> Any:
    t = _astpb.Type()
    for name, value in kind.items():
        if name == "dyn":
            t.dyn.SetInParent()
        else:
            setattr(t, name, value)
    return t


ANY = _t(well_known=1)
DYN = _t(dyn=True)
BOOL = _t(primitive=1)
INT = _t(primitive=2)
STRING = _t(primitive=5)


def _list(elem: Any) -> Any:
    t = _astpb.Type()
    t.list_type.elem_type.CopyFrom(elem)
    return t


def _map(key: Any, value: Any) -> Any:
    t = _astpb.Type()
    t.map_type.key_type.CopyFrom(key)
    t.map_type.value_type.CopyFrom(value)
    return t


def _optional(value: Any) -> Any:
    t = _astpb.Type()
    t.abstract_type.name = "optional_type"
    t.abstract_type.parameter_types.add().CopyFrom(value)
    return t


ATTRIBUTES = _map(STRING, _map(STRING, ANY))
_QUANTITY = _astpb.Type()
_QUANTITY.abstract_type.name = "kubernetes.Quantity"
CAPACITY = _map(STRING, _map(STRING, _QUANTITY))


def is_any(t: Any) -> bool:
    return t is not None and t.WhichOneof("kind") == "well_known" and t.well_known == 1


def _dyn_like(t: Any) -> bool:
    return t is None or t.WhichOneof("kind") == "dyn" or is_any(t)


def _optional_value(t: Any) -> Any | None:
    if t is not None and t.WhichOneof("kind") == "abstract_type" and t.abstract_type.name == "optional_type" \
            and t.abstract_type.parameter_types:
        return t.abstract_type.parameter_types[0]
    return None


def type_name(t: Any) -> str:
    """cel-go's ``Type.TypeName()`` (the ``format`` validator's messages use it)."""
    which = t.WhichOneof("kind") if t is not None else "dyn"
    if which == "primitive":
        return _astpb.PRIMITIVES.get(t.primitive, "dyn")
    if which == "well_known":
        return {1: "google.protobuf.Any", 2: "google.protobuf.Timestamp", 3: "google.protobuf.Duration"}.get(
            t.well_known, "dyn")
    if which == "list_type":
        return "list"
    if which == "map_type":
        return "map"
    if which == "null":
        return "null_type"
    if which == "type":
        return "type"
    if which == "message_type":
        return str(t.message_type)
    if which == "abstract_type":
        return str(t.abstract_type.name)
    if which == "wrapper":
        return _astpb.PRIMITIVES.get(t.wrapper, "dyn")
    return "dyn"


class GoTypes:
    """cel-go's types of the nodes of one checked expression, and its comprehension-range errors."""

    def __init__(self, tree: Tree) -> None:
        self.cpp = tree.types
        self.types: dict[int, Any] = {}
        #: ``(node id, message)`` of every comprehension over a value cel-go cannot iterate.
        self.range_errors: list[tuple[int, str]] = []
        self._visit(tree.root, {})

    def of(self, node: Any) -> Any:
        found = self.types.get(node.id)
        return found if found is not None else node.type

    def get(self, node_id: int, default: Any = None) -> Any:
        """``type_map.get`` with cel-go's types."""
        found = self.types.get(node_id)
        return found if found is not None else self.cpp.get(node_id, default)

    def _set(self, node: Any, t: Any) -> Any:
        self.types[node.id] = t
        return t

    def _visit(self, e: Any, scope: dict[str, Any]) -> Any:
        kind = e.kind
        cpp = e.type
        if kind == "ident_expr":
            name = e.name
            if name in scope:
                return self._set(e, scope[name])
            if name == "device.attributes":
                return self._set(e, ATTRIBUTES)
            return cpp
        if kind == "select_expr":
            operand = self._visit(e.operand, scope)
            if e.test_only:
                return cpp
            return self._set(e, self._field(operand, e.field, cpp))
        if kind == "call_expr":
            return self._call(e, scope, cpp)
        if kind == "list_expr":
            optional = e.optional_indices
            elem = None
            for index, element in enumerate(e.elements):
                et = self._visit(element, scope)
                if index in optional:
                    et = _optional_value(et) or et
                elem = self._join(elem, et)
            return self._set(e, _list(elem)) if elem is not None and is_any(elem) else cpp
        if kind == "struct_expr":
            key = value = None
            for entry in e.entries:
                if entry.map_key is not None:
                    key = self._join(key, self._visit(entry.map_key, scope))
                vt = self._visit(entry.value, scope)
                if entry.optional_entry:
                    vt = _optional_value(vt) or vt
                value = self._join(value, vt)
            if e.message_name or key is None or value is None or not (is_any(key) or is_any(value)):
                return cpp
            return self._set(e, _map(key, value))
        if kind == "comprehension_expr":
            return self._comprehension(e, scope, cpp)
        return cpp

    @staticmethod
    def _join(previous: Any, current: Any) -> Any:
        """cel-go ``mostGeneral`` of two element types (the first ``dyn``/``any`` wins)."""
        if previous is None or (_dyn_like(current) and not _dyn_like(previous)):
            return current
        return previous

    @staticmethod
    def _field(operand: Any, field: str, cpp: Any) -> Any:
        which = operand.WhichOneof("kind") if operand is not None else None
        if which == "map_type":
            return operand.map_type.value_type
        if which == "message_type" and operand.message_type == "kubernetes.DRADevice" and field == "attributes":
            return ATTRIBUTES
        if which == "message_type" and operand.message_type == "kubernetes.DRADevice" and field == "capacity":
            return CAPACITY
        if _dyn_like(operand):
            return DYN
        inner = _optional_value(operand)
        if inner is not None and inner.WhichOneof("kind") == "map_type":
            return _optional(inner.map_type.value_type)
        return cpp

    def _call(self, e: Any, scope: dict[str, Any], cpp: Any) -> Any:
        call = e
        target = self._visit(call.target, scope) if call.target is not None else None
        args = [self._visit(arg, scope) for arg in call.args]
        function = call.function
        if function == "_[_]" and len(args) == 2:
            operand = args[0]
            which = operand.WhichOneof("kind") if operand is not None else None
            if which == "list_type":
                return self._set(e, operand.list_type.elem_type)
            if which == "map_type":
                return self._set(e, operand.map_type.value_type)
            if _dyn_like(operand):
                return self._set(e, DYN)
            return cpp
        if function in ("_[?_]", "_?._") and len(args) == 2:
            operand = _optional_value(args[0]) or args[0]
            which = operand.WhichOneof("kind") if operand is not None else None
            if which == "map_type":
                return self._set(e, _optional(operand.map_type.value_type))
            if which == "list_type":
                return self._set(e, _optional(operand.list_type.elem_type))
            if which == "message_type" and operand.message_type == "kubernetes.DRADevice" \
                    and call.args[1].kind == "const_expr" and call.args[1].value == "attributes":
                return self._set(e, _optional(ATTRIBUTES))
            return self._set(e, _optional(DYN)) if _dyn_like(operand) else cpp
        if function == "_?_:_" and len(args) == 3:
            return self._set(e, args[1])
        if function in ("optional.of", "optional.ofNonZeroValue") and len(args) == 1 and is_any(args[0]):
            return self._set(e, _optional(ANY))
        if function in ("value", "orValue") and target is not None:
            inner = _optional_value(target)
            if inner is not None and is_any(inner):
                return self._set(e, ANY)
        if function == "or" and target is not None and _optional_value(target) is not None:
            return self._set(e, target)
        return cpp

    def _comprehension(self, e: Any, scope: dict[str, Any], cpp: Any) -> Any:
        comp = e
        range_type = self._visit(comp.iter_range, scope)
        accu = self._visit(comp.accu_init, scope)
        inner = dict(scope)
        if accu is not None:
            inner[comp.accu_var] = accu
        two = bool(comp.iter_var2)
        which = range_type.WhichOneof("kind") if range_type is not None else "dyn"
        if which == "list_type":
            first, second = (INT, range_type.list_type.elem_type) if two else (range_type.list_type.elem_type, None)
        elif which == "map_type":
            first, second = range_type.map_type.key_type, range_type.map_type.value_type
        elif is_any(range_type):
            self.range_errors.append((comp.iter_range.id, ANY_RANGE.format("any")))
            first = second = DYN  # cel-go continues with the error type, which reports nothing more
        else:
            first = second = DYN
        loop = dict(inner)
        loop[comp.iter_var] = first
        if two and second is not None:
            loop[comp.iter_var2] = second
        self._visit(comp.loop_condition, loop)
        self._visit(comp.loop_step, loop)
        result = self._visit(comp.result, inner)
        if result is not None and (is_any(result) or self.types.get(comp.result.id) is not None):
            return self._set(e, result)
        return cpp


#: Macros that expand to comprehensions (cel-go parser, bindings, two-variable, lists, optionals).
_MACROS = re.compile(r"\b(?:all|exists|exists_one|existsOne|map|filter|bind|transformList|transformMap|"
                     r"transformMapEntry|optMap|optFlatMap|sortBy)\s*\(")


def go_types(tree: Tree, text: str, validated: bool) -> GoTypes | None:
    """cel-go's types where they can matter, or ``None`` (then they equal cel-cpp's for every check).

    They differ only where an attribute value is read (or the capacity through the ``device``
    object, which cel-cpp sees as ``google.protobuf.Struct``), and matter only for a comprehension, an
    AST validator that reads types (``validated``: a literal or a ``format`` call) or a ``dyn``
    result.
    """
    if "attributes" not in text and "capacity" not in text:
        return None
    root = tree.root.type
    dyn_root = root is None or root.WhichOneof("kind") != "primitive"
    if not (dyn_root or validated or _MACROS.search(text)):
        return None
    return GoTypes(tree)
