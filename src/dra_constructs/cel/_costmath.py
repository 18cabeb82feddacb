"""Arithmetic, types and the DRA size estimator of the CEL cost estimate (``cost.py``).

``Est`` is cel-go's ``CostEstimate``/``SizeEstimate`` (a min/max pair saturating at 2^64-1 like
Go's uint64 helpers); ``type_kind`` is cel-go's ``types.Kind`` of a checked type; ``dra_size``
is the ``sizeEstimator`` of ``k8s.io/dynamic-resource-allocation/cel/compile.go``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dra_constructs.cel import _astpb

__all__ = ["DEVICE_131", "DEVICE_134", "MAX_UINT64", "ONE", "UNKNOWN", "ZERO", "Decl", "Est", "dra_size",
           "is_scalar", "same_type", "sat_add", "sat_mul", "type_kind", "type_name"]

MAX_UINT64 = (1 << 64) - 1
_TWO_TO_64 = math.ldexp(1.0, 64)
_K8S_STRUCTS = {"kubernetes.Quantity", "kubernetes.Semver", "kubernetes.URL", "kubernetes.NamedFormat"}
_OPAQUE = {"net.IP", "net.CIDR", "optional_type"}


def sat_add(x: int, y: int) -> int:
    return MAX_UINT64 if x + y > MAX_UINT64 else x + y


def sat_mul(x: int, y: int) -> int:
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
        return Est(sat_mul(self.min, o.min), sat_mul(self.max, o.max))

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


def is_scalar(t: Any, with_optional: bool) -> bool:
    kind = type_kind(t)
    if kind in ("bool", "double", "duration", "int", "timestamp", "uint"):
        return True
    if with_optional and t is not None and t.WhichOneof("kind") == "abstract_type" \
            and t.abstract_type.name == "optional_type" and t.abstract_type.parameter_types:
        return is_scalar(t.abstract_type.parameter_types[0], with_optional)
    return False


def type_name(t: Any) -> str:
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
class Decl:
    """A node of the DRA ``DeclType`` tree: fields, key/element types and ``MaxElements``."""

    max_elements: int
    fields: tuple[tuple[str, Decl], ...] = ()
    key: Decl | None = None
    elem: Decl | None = None


_ATTRIBUTE = Decl(64)  # any, DeviceAttributeMaxValueLength
_DOMAIN, _ID, _DRIVER = Decl(63), Decl(32), Decl(63)
_INNER_ATTRS = Decl(32, key=_ID, elem=_ATTRIBUTE)
_INNER_CAPACITY = Decl(32, key=_ID, elem=Decl(0))  # quantity: no MaxElements
_DEVICE_FIELDS = (("driver", _DRIVER), ("attributes", Decl(32, key=_DOMAIN, elem=_INNER_ATTRS)),
                  ("capacity", Decl(32, key=_DOMAIN, elem=_INNER_CAPACITY)))
DEVICE_131 = Decl(0, fields=_DEVICE_FIELDS)
DEVICE_134 = Decl(0, fields=(("allowMultipleAllocations", Decl(1)), *_DEVICE_FIELDS))


def dra_size(path: Sequence[str] | None, device: Decl) -> Est | None:
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


def same_type(a: Any, b: Any) -> bool:
    return a is not None and b is not None and a.SerializeToString() == b.SerializeToString()
