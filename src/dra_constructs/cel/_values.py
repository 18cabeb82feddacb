"""Run-time values: the carrier messages of the Kubernetes types, and cel-go's equality.

Moved out of ``_runtime`` (see its docstring for how evaluation works).
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from dra_constructs.cel.quantity import Quantity
from dra_constructs.cel.semver import Semver, parse_semver


class CelRuntimeError(Exception):
    """A run-time error of a selector: the scheduler fails the allocation, it is not a no-match."""


class DeviceError(CelRuntimeError):
    """The device itself cannot be turned into CEL values (e.g. an unparsable version)."""


# --- carriers ----------------------------------------------------------------------------------

_CARRIERS = {"kubernetes": ("Quantity", "Semver", "URL", "NamedFormat"), "net": ("IP", "CIDR")}
_F = descriptor_pb2.FieldDescriptorProto


def _carrier_pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for package, names in _CARRIERS.items():
        file = descriptor_pb2.FileDescriptorProto(name=f"dra_constructs/{package}_carriers.proto",
                                                  package=package, syntax="proto3")
        for name in names:
            message = file.message_type.add(name=name)
            message.field.add(name="v", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
        pool.Add(file)
    return pool


POOL = _carrier_pool()
_CLASSES: dict[str, Any] = {f"{p}.{n}": message_factory.GetMessageClass(POOL.FindMessageTypeByName(f"{p}.{n}"))
            for p, names in _CARRIERS.items() for n in names}
QuantityMsg = _CLASSES["kubernetes.Quantity"]
SemverMsg = _CLASSES["kubernetes.Semver"]
URLMsg = _CLASSES["kubernetes.URL"]
FormatMsg = _CLASSES["kubernetes.NamedFormat"]
IPMsg = _CLASSES["net.IP"]
CIDRMsg = _CLASSES["net.CIDR"]
_CARRIER_TYPES = tuple(_CLASSES.values())


_NO_VALUE: Any = object()


def _no_overload(*_: Any) -> ValueError:
    return ValueError("no such overload")


def _q(value: Any) -> Quantity:
    if not isinstance(value, QuantityMsg):
        raise _no_overload()
    return Quantity.decode(value.v)


def _s(value: Any) -> Semver:
    if not isinstance(value, SemverMsg):
        raise _no_overload()
    return _semver_cache(value.v)


@cache
def _semver_cache(text: str) -> Semver:
    return parse_semver(text)


def quantity_msg(q: Quantity) -> Any:
    return QuantityMsg(v=q.encode())


def semver_msg(v: Semver) -> Any:
    return SemverMsg(v=v.encode())


# --- Go equality -------------------------------------------------------------------------------

def go_equal(lhs: Any, rhs: Any) -> bool:
    """cel-go ``types.Equal`` (raises ``ValueError`` where cel-go returns an error)."""
    if lhs is None or rhs is None:
        return lhs is None and rhs is None
    if isinstance(lhs, _CARRIER_TYPES):
        if type(lhs) is not type(rhs):
            raise _no_overload()
        if isinstance(lhs, QuantityMsg):
            return _q(lhs).cmp(_q(rhs)) == 0
        if isinstance(lhs, SemverMsg):
            return _s(lhs).compare(_s(rhs)) == 0
        return bool(lhs.v == rhs.v)
    if isinstance(lhs, bool) or isinstance(rhs, bool):
        return isinstance(lhs, bool) and isinstance(rhs, bool) and lhs == rhs
    if isinstance(lhs, int | float) and isinstance(rhs, int | float):
        if (isinstance(lhs, float) and math.isnan(lhs)) or (isinstance(rhs, float) and math.isnan(rhs)):
            return False
        return lhs == rhs
    if isinstance(lhs, str):
        return isinstance(rhs, str) and lhs == rhs
    if isinstance(lhs, bytes | bytearray):
        return isinstance(rhs, bytes | bytearray) and bytes(lhs) == bytes(rhs)
    if isinstance(lhs, list):
        if not isinstance(rhs, list) or len(lhs) != len(rhs):
            return False
        for a, b in zip(lhs, rhs, strict=True):
            try:
                if not go_equal(a, b):
                    return False
            except ValueError:  # cel-go's list equality only stops at False, not at errors
                continue
        return True
    if isinstance(lhs, dict):
        if not isinstance(rhs, dict) or len(lhs) != len(rhs):
            return False
        for key, value in lhs.items():
            found = [v for k, v in rhs.items() if _key_equal(k, key)]
            if not found:
                return False
            try:
                if not go_equal(value, found[0]):
                    return False
            except ValueError:
                continue
        return True
    if type(lhs) is type(rhs):
        return bool(lhs == rhs)
    return False


def _key_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b) and type(a) in (int, str) and type(b) in (int, str)


def _k8s_in(element: Any, container: Any) -> bool:
    """cel-go ``baseList.Contains``: ``element.Equal(item)``; errors are skipped."""
    if isinstance(container, list):
        for item in container:
            try:
                if go_equal(element, item):
                    return True
            except ValueError:
                continue
        return False
    if isinstance(container, dict):
        return any(_key_equal(element, key) for key in container)
    raise _no_overload()


def _k8s_in_set(element: Any, container: list[Any]) -> bool:
    """cel-go's ``OptOptimize`` set membership for ``x in [<primitive constants>]``.

    cel-go looks ``x`` up in a Go map: a Semver (a struct holding slices) or a list or map value
    is not hashable, and the evaluation fails with Go's panic message.
    """
    if isinstance(element, SemverMsg):
        raise ValueError("internal error: runtime error: hash of unhashable type cel.Semver")
    if isinstance(element, list | dict):
        kind = "types.baseList" if isinstance(element, list) else "types.baseMap"
        raise ValueError(f"internal error: runtime error: hash of unhashable type {kind}")
    return _k8s_in(element, container)


def _k8s_ne(lhs: Any, rhs: Any) -> bool:
    """cel-go ``evalNe``: ``types.Bool(types.Equal(lVal, rVal) != types.True)`` (interpreter/
    interpretable.go, v0.22-v0.27): an equality that is an error (a Quantity, Semver, URL, IP or
    CIDR against another type) makes ``!=`` true, where ``==`` stays the error."""
    try:
        return not go_equal(lhs, rhs)
    except ValueError:
        return True


def _domain(mapping: Any, key: Any) -> Any:
    """The DRA compiler's mapper: an unknown domain reads as an empty map."""
    if not isinstance(mapping, dict):
        raise _no_overload()
    return mapping.get(key, {})
