"""Types of a raw ResourceSlice's fields, checked where slices are read (before any parsing).

A ``metadata: "x"``, ``devices: 5`` or ``{"int": "two"}`` is rejected by the API server; here it
is a :class:`~dra_constructs.errors.DraConstructsError` naming the file (and line), the field
path and the expected type, so the parsing after it never meets a wrong type. ``null`` means
"unset" (as in Kubernetes); fields the library does not read are not checked.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["SliceProblem", "dotted_path", "slice_problem"]

_INT64 = (-(2**63), 2**63 - 1)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and _INT64[0] <= value <= _INT64[1]


def _is_quantity(value: Any) -> bool:
    return isinstance(value, str) or _is_int(value) or (isinstance(value, float) and math.isfinite(value))


_ATTRIBUTE_TYPES: dict[str, tuple[str, Any]] = {
    "int": ("a 64-bit integer", _is_int),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "string": ("a string", lambda v: isinstance(v, str)),
    "version": ("a semantic version string", lambda v: isinstance(v, str)),
}

#: (path keys, expected, value) of the first wrong-typed field.
SliceProblem = tuple[list[str | int], str, Any]


def dotted_path(keys: list[str | int]) -> str:
    """``["items", 0, "spec", "devices"]`` -> ``items[0].spec.devices`` (odd keys quoted)."""
    out = ""
    for key in keys:
        if isinstance(key, int):
            out += f"[{key}]"
        elif key.isidentifier():
            out = f"{out}.{key}" if out else key
        else:
            out += f"[{key!r}]"
    return out


def _mapping(value: Any, path: list[str | int]) -> SliceProblem | None:
    return None if value is None or isinstance(value, dict) else (path, "a mapping", value)


def _device_body(body: dict[str, Any], path: list[str | int]) -> SliceProblem | None:
    attributes = body.get("attributes")
    problem = _mapping(attributes, [*path, "attributes"])
    if problem:
        return problem
    for name, attribute in (attributes or {}).items():
        where = [*path, "attributes", str(name)]
        if not isinstance(attribute, dict):
            return where, "a mapping with one of int, bool, string, version", attribute
        typed = [key for key in attribute if key in _ATTRIBUTE_TYPES]
        if len(typed) != 1:
            return where, "exactly one of int, bool, string, version", attribute
        expected, test = _ATTRIBUTE_TYPES[typed[0]]
        if not test(attribute[typed[0]]):
            return [*where, typed[0]], expected, attribute[typed[0]]
    capacity = body.get("capacity")
    problem = _mapping(capacity, [*path, "capacity"])
    if problem:
        return problem
    for name, value in (capacity or {}).items():
        where = [*path, "capacity", str(name)]
        if isinstance(value, dict):
            quantity = value.get("value", value.get("quantity"))
            if not _is_quantity(quantity):
                return [*where, "value"], "a quantity (like 80Gi)", quantity
        elif not _is_quantity(value):
            return where, "a quantity or {value: quantity}", value
    multi = body.get("allowMultipleAllocations")
    if multi is not None and not isinstance(multi, bool):
        return [*path, "allowMultipleAllocations"], "true or false", multi
    return None


def slice_problem(resource_slice: dict[str, Any]) -> SliceProblem | None:
    """The first field of a ResourceSlice with the wrong type, or ``None``."""
    metadata = resource_slice.get("metadata")
    problem = _mapping(metadata, ["metadata"])
    if problem:
        return problem
    if isinstance(metadata, dict) and metadata.get("name") is not None and not isinstance(metadata["name"], str):
        return ["metadata", "name"], "a string", metadata["name"]
    spec = resource_slice.get("spec")
    if not isinstance(spec, dict):
        return ["spec"], "a mapping (the ResourceSlice's spec)", spec
    for key in ("driver", "nodeName"):
        if spec.get(key) is not None and not isinstance(spec[key], str):
            return ["spec", key], "a string", spec[key]
    pool = spec.get("pool")
    problem = _mapping(pool, ["spec", "pool"])
    if problem:
        return problem
    if isinstance(pool, dict) and pool.get("name") is not None and not isinstance(pool["name"], str):
        return ["spec", "pool", "name"], "a string", pool["name"]
    devices = spec.get("devices")
    if devices is not None and not isinstance(devices, list):
        return ["spec", "devices"], "a list of devices", devices
    for i, device in enumerate(devices or []):
        path: list[str | int] = ["spec", "devices", i]
        if not isinstance(device, dict):
            return path, "a mapping (a device)", device
        if not isinstance(device.get("name"), str):
            return [*path, "name"], "a string (the device name)", device.get("name")
        basic = device.get("basic")
        problem = _mapping(basic, [*path, "basic"]) or _device_body(device, path)
        if problem:
            return problem
        if isinstance(basic, dict):
            problem = _device_body(basic, [*path, "basic"])
            if problem:
                return problem
    return None
