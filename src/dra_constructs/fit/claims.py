"""The claims of a fit check: requests, alternatives, constraints, tolerations, DeviceClasses.

Read from ``ResourceClaim.spec`` (or a template's ``spec.spec``) in any served version
(``resource.k8s.io`` v1beta1, v1beta2, v1: ``exactly`` or the request itself, ``firstAvailable``).
Malformed claims raise :class:`~dra_constructs.errors.DraConstructsError` naming object, field and value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dra_constructs.errors import DraConstructsError
from dra_constructs.fit.quantities import quantity

__all__ = ["Claim", "Constraint", "DeviceClass", "Request", "SubRequest", "Toleration", "claim_from_spec"]


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass(frozen=True)
class Toleration:
    """A device toleration (``resourceclaim.ToleratesTaint``)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Mapping[str, Any]) -> bool:
        if self.effect and self.effect != taint.get("effect"):
            return False
        if self.key and self.key != taint.get("key"):
            return False
        if self.operator == "Exists":
            return True
        return self.value == str(taint.get("value") or "")


@dataclass(frozen=True)
class SubRequest:
    """What one request (or one ``firstAvailable`` alternative) asks for."""

    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = "ExactCount"
    count: int = 1
    admin_access: bool | None = None
    tolerations: tuple[Toleration, ...] = ()
    capacity: tuple[tuple[str, Fraction], ...] = ()


@dataclass(frozen=True)
class Request:
    """A request: one way to be satisfied, or ``firstAvailable`` alternatives in order."""

    name: str
    alternatives: tuple[SubRequest, ...]
    first_available: bool = False


@dataclass(frozen=True)
class Constraint:
    """``matchAttribute`` or ``distinctAttribute`` over ``requests`` (empty: all requests)."""

    requests: tuple[str, ...]
    attribute: str
    distinct: bool = False


@dataclass(frozen=True)
class Claim:
    """One claim of the Pod: its requests and constraints."""

    name: str
    requests: tuple[Request, ...]
    constraints: tuple[Constraint, ...] = ()


@dataclass(frozen=True)
class DeviceClass:
    """A DeviceClass: its CEL selectors (evaluated before the request's)."""

    name: str
    selectors: tuple[str, ...] = ()


def _selectors(raw: Any, where: str, field_name: str) -> tuple[str, ...]:
    found = []
    for index, selector in enumerate(_as_list(raw)):
        expression = _as_dict(_as_dict(selector).get("cel")).get("expression")
        if not isinstance(expression, str) or not expression:
            raise DraConstructsError(where, f"{field_name}[{index}].cel.expression", selector,
                                     "a selector needs a CEL expression", "write selectors: [{cel: {expression: ...}}]")
        found.append(expression)
    return tuple(found)


def _tolerations(raw: Any) -> tuple[Toleration, ...]:
    return tuple(Toleration(str(t.get("key") or ""), str(t.get("operator") or "Equal"), str(t.get("value") or ""),
                            str(t.get("effect") or "")) for t in map(_as_dict, _as_list(raw)))


def _sub_request(body: Mapping[str, Any], name: str, where: str, field_name: str) -> SubRequest:
    device_class = body.get("deviceClassName")
    if not isinstance(device_class, str) or not device_class:
        raise DraConstructsError(where, f"{field_name}.deviceClassName", device_class,
                                 "a request needs a deviceClassName", "name the DeviceClass, e.g. gpu.nvidia.com")
    mode = str(body.get("allocationMode") or "ExactCount")
    if mode not in ("ExactCount", "All"):
        raise DraConstructsError(where, f"{field_name}.allocationMode", mode, "unknown allocation mode",
                                 "use ExactCount or All")
    count = body.get("count", 1)
    if mode == "ExactCount" and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
        raise DraConstructsError(where, f"{field_name}.count", count, "count must be a positive integer",
                                 "write count: 1 (or more)")
    admin = body.get("adminAccess")
    capacity = tuple((str(k), quantity(str(v), where, f"{field_name}.capacity.requests.{k}"))
                     for k, v in _as_dict(_as_dict(body.get("capacity")).get("requests")).items())
    return SubRequest(name, device_class, _selectors(body.get("selectors"), where, f"{field_name}.selectors"),
                      mode, int(count) if mode == "ExactCount" else 0, None if admin is None else bool(admin),
                      _tolerations(body.get("tolerations")), capacity)


def claim_from_spec(name: str, spec: Mapping[str, Any], where: str) -> Claim:
    """A claim from ``ResourceClaim.spec`` (or a template's ``spec.spec``), any served version."""
    devices = _as_dict(_as_dict(spec).get("devices"))
    requests = []
    for index, raw in enumerate(_as_list(devices.get("requests"))):
        raw = _as_dict(raw)
        request_name = str(raw.get("name") or f"requests[{index}]")
        field_name = f"spec.devices.requests[{request_name!r}]"
        if raw.get("firstAvailable"):
            subs = tuple(_sub_request(_as_dict(s), str(_as_dict(s).get("name") or f"{i}"), where,
                                      f"{field_name}.firstAvailable[{i}]")
                         for i, s in enumerate(_as_list(raw.get("firstAvailable"))))
            requests.append(Request(request_name, subs, first_available=True))
            continue
        body = _as_dict(raw.get("exactly")) if "exactly" in raw else raw
        requests.append(Request(request_name, (_sub_request(body, request_name, where, field_name),)))
    if not requests:
        raise DraConstructsError(where, "spec.devices.requests", None, "the claim requests no devices",
                                 "add spec.devices.requests")
    constraints = []
    for index, raw in enumerate(_as_list(devices.get("constraints"))):
        raw = _as_dict(raw)
        names = tuple(str(r) for r in _as_list(raw.get("requests")))
        if raw.get("matchAttribute"):
            constraints.append(Constraint(names, str(raw["matchAttribute"])))
        elif raw.get("distinctAttribute"):
            constraints.append(Constraint(names, str(raw["distinctAttribute"]), distinct=True))
        else:
            raise DraConstructsError(where, f"spec.devices.constraints[{index}]", raw,
                                     "empty constraint (unsupported constraint type?)",
                                     "write matchAttribute: <domain>/<attribute>")
    return Claim(name, tuple(requests), tuple(constraints))
