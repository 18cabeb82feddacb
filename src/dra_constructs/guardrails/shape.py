"""Types of the manifest fields the rules read, checked when a file is loaded (pure Python).

The API server rejects an object whose ``containers`` is a mapping or whose ``count`` is
``1e30``; the rules, which degrade wrong types to "empty", would silently pass it. So the
loader checks these fields first and a wrong type is an input error (exit 2) naming the file,
line and field. ``null`` is always accepted (Kubernetes reads it as "unset"); fields the rules
do not read, and custom kinds, are not checked.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["ShapeProblem", "metadata_only_ok", "shape_problem"]

_INT64 = (-(2**63), 2**63 - 1)

# A field's type: "str", "int64", "bool", "quantity" (string or finite number), "any", a dict of
# known fields (others unchecked), a one-item list (list of that), or ("map", type).
_Type = Any
_METADATA: dict[str, _Type] = {"name": "str", "generateName": "str", "namespace": "str",
                               "labels": ("map", "str"), "annotations": ("map", "str")}
_CONTAINER: dict[str, _Type] = {
    "name": "str", "image": "str", "command": ["str"], "args": ["str"],
    "env": [{"name": "str", "value": "str", "valueFrom": {}}], "envFrom": [{}],
    "resources": {"limits": ("map", "quantity"), "requests": ("map", "quantity"),
                  "claims": [{"name": "str", "request": "str"}]},
    "lifecycle": {"preStop": {}}, "securityContext": {},
}
_POD_SPEC: dict[str, _Type] = {
    "containers": [_CONTAINER], "initContainers": [_CONTAINER], "ephemeralContainers": [_CONTAINER],
    "resourceClaims": [{"name": "str", "resourceClaimName": "str", "resourceClaimTemplateName": "str"}],
    "terminationGracePeriodSeconds": "int64", "nodeSelector": ("map", "str"), "tolerations": [{}],
    "runtimeClassName": "str", "volumes": [{}],
}
_TEMPLATE: dict[str, _Type] = {"metadata": _METADATA, "spec": _POD_SPEC}
_REQUEST_FIELDS: dict[str, _Type] = {
    "name": "str", "deviceClassName": "str", "allocationMode": "str", "count": "int64", "adminAccess": "bool",
    "selectors": [{"cel": {"expression": "str"}}], "tolerations": [{}],
}
_DEVICES: dict[str, _Type] = {
    "requests": [{**_REQUEST_FIELDS, "exactly": _REQUEST_FIELDS, "firstAvailable": [_REQUEST_FIELDS]}],
    "constraints": [{"requests": ["str"], "matchAttribute": "str"}],
    "config": [{"requests": ["str"], "opaque": {"driver": "str", "parameters": "any"}}],
}
_WORKLOAD: dict[str, _Type] = {"spec": {"template": _TEMPLATE}}
_BY_KIND: dict[str, dict[str, _Type]] = {
    "Pod": {"spec": _POD_SPEC},
    "PodTemplate": {"template": _TEMPLATE},
    **dict.fromkeys(("Deployment", "ReplicaSet", "ReplicationController", "StatefulSet", "DaemonSet", "Job"),
                    _WORKLOAD),
    "CronJob": {"spec": {"jobTemplate": {"metadata": _METADATA, "spec": {"template": _TEMPLATE}}}},
}
_RESOURCE_KINDS: dict[str, dict[str, _Type]] = {
    "ResourceClaim": {"spec": {"devices": _DEVICES}},
    "ResourceClaimTemplate": {"spec": {"metadata": _METADATA, "spec": {"devices": _DEVICES}}},
    "DeviceClass": {"spec": {"selectors": [{"cel": {"expression": "str"}}], "config": _DEVICES["config"]}},
}

#: Kinds with fields checked outside ``metadata`` (of some API group): the others' schema is ``metadata`` alone.
_CHECKED_KINDS = frozenset(_BY_KIND) | frozenset(_RESOURCE_KINDS)
#: ``_METADATA``'s fields by type, for :func:`metadata_only_ok` (derived, so a field added there is checked there
#: too); a field of another type turns the shortcut off (``_METADATA_COVERED``): the walk decides.
_METADATA_STRS = tuple(name for name, kind in _METADATA.items() if kind == "str")
_METADATA_STR_MAPS = tuple(name for name, kind in _METADATA.items() if kind == ("map", "str"))
_METADATA_COVERED = len(_METADATA_STRS) + len(_METADATA_STR_MAPS) == len(_METADATA)

ShapeProblem = tuple[list[str | int], str, Any]


_SCHEMAS: dict[tuple[bool, str], dict[str, _Type]] = {}


def _schema(obj: dict[str, Any]) -> dict[str, _Type]:
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    resource = isinstance(api_version, str) and api_version.startswith("resource.k8s.io/") and kind in _RESOURCE_KINDS
    name = kind if isinstance(kind, str) and (resource or kind in _BY_KIND) else ""
    found = _SCHEMAS.get((resource, name))
    if found is None:  # one per kind (a cluster export repeats a few kinds 100,000 times)
        found = _SCHEMAS[resource, name] = {"metadata": _METADATA, **(
            _RESOURCE_KINDS[name] if resource else _BY_KIND.get(name, {}))}
    return found


def _scalar_problem(kind: str, value: Any) -> str | None:
    if kind == "str":
        return None if isinstance(value, str) else "a string"
    if kind == "bool":
        return None if isinstance(value, bool) else "true or false"
    if kind == "int64":
        if isinstance(value, int) and not isinstance(value, bool) and _INT64[0] <= value <= _INT64[1]:
            return None
        return "a 64-bit integer"
    if kind == "quantity":
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            return None
        return None if isinstance(value, float) and math.isfinite(value) else "a quantity (like 1 or 10Gi)"
    return None  # "any"


def metadata_only_ok(obj: dict[str, Any]) -> bool:
    """``True`` only when :func:`shape_problem` finds nothing in ``obj``, a kind whose fields are
    checked in ``metadata`` alone (ConfigMaps, Services, custom kinds: most of a cluster export).

    The same checks as the walk of :data:`_METADATA`, without paths or a stack, exact types only;
    ``False`` is no verdict (another kind, or a problem): :func:`shape_problem` decides and names it.
    """
    kind = obj.get("kind")
    if kind.__class__ is not str or kind in _CHECKED_KINDS or not _METADATA_COVERED:
        return False
    metadata = obj.get("metadata")
    if metadata is None:
        return True
    if metadata.__class__ is not dict:
        return False
    get = metadata.get
    for name in _METADATA_STRS:
        value = get(name)
        if value is not None and value.__class__ is not str:
            return False
    for name in _METADATA_STR_MAPS:
        value = get(name)
        if value is None:
            continue
        if value.__class__ is not dict:
            return False
        for item in value.values():
            if item is not None and item.__class__ is not str:
                return False
    return True


def shape_problem(obj: dict[str, Any]) -> ShapeProblem | None:
    """The first field the rules read that has the wrong type: ``(path keys, expected, value)``."""
    # Each entry's path is (parent's path, key): the list is built only for the problem found.
    stack: list[tuple[Any, _Type, Any]] = [(obj, _schema(obj), None)]
    pop, push = stack.pop, stack.append
    while stack:
        value, kind, path = pop()
        if value is None or kind == "any":
            continue
        if kind.__class__ is str:
            expected = _scalar_problem(kind, value)
            if expected is not None:
                return _keys(path), expected, value
        elif kind.__class__ is dict:
            if not isinstance(value, dict):
                return _keys(path), "a mapping", value
            for key in reversed(kind):  # checked in the schema's order
                if key in value:
                    push((value[key], kind[key], (path, key)))
        elif kind.__class__ is list:
            if not isinstance(value, list):
                return _keys(path), "a list", value
            for i in range(len(value) - 1, -1, -1):
                push((value[i], kind[0], (path, i)))
        else:  # ("map", type of the values)
            if not isinstance(value, dict):
                return _keys(path), "a mapping", value
            stack.extend((item, kind[1], (path, str(key))) for key, item in value.items())
    return None


def _keys(path: Any) -> list[str | int]:
    keys: list[str | int] = []
    while path is not None:
        path, key = path
        keys.append(key)
    return keys[::-1]
