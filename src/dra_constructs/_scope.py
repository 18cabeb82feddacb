"""Construct-layer helpers: the app-wide target version and lazy construct paths."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import constructs

from .target import Target

if TYPE_CHECKING:
    from .cel import Device

__all__ = [
    "DRA_EXTENDED_RESOURCES_CONTEXT",
    "KUBERNETES_VERSION_CONTEXT",
    "guard",
    "lazy_path",
    "resolve_dra_extended_resources",
    "resolve_inventory",
    "resolve_target",
    "set_dra_extended_resources",
    "set_inventory",
    "set_kubernetes_version",
]

#: cdk8s context key for the app-wide target (see :func:`set_kubernetes_version`).
KUBERNETES_VERSION_CONTEXT = "dra-constructs/kubernetes-version"

# Context lookups are jsii round trips; most constructs share a handful of scopes, so cache per scope.
_TARGET_BY_SCOPE: weakref.WeakKeyDictionary[constructs.Construct, Target] = weakref.WeakKeyDictionary()


def resolve_target(scope: constructs.Construct, override: str | Target | None, where: str) -> Target:
    """``override`` if given, else the scope's ``dra-constructs/kubernetes-version`` context, else 1.32."""
    if override is not None:
        return Target.parse(override, where)
    cached = _TARGET_BY_SCOPE.get(scope)
    if cached is None:
        value = scope.node.try_get_context(KUBERNETES_VERSION_CONTEXT)
        cached = Target.parse(value, f"context {KUBERNETES_VERSION_CONTEXT}")
        _TARGET_BY_SCOPE[scope] = cached
    return cached


_GUARDED_SCOPES: weakref.WeakSet[constructs.Construct] = weakref.WeakSet()


def guard(scope: constructs.Construct) -> None:
    """Make sure the App of ``scope`` runs the guardrails at synth (once per scope, no jsii call after)."""
    if scope in _GUARDED_SCOPES:
        return
    from .guardrails.app_validation import ensure_guardrails

    ensure_guardrails(scope)
    _GUARDED_SCOPES.add(scope)


def lazy_path(scope: constructs.Construct, id: str) -> Callable[[], str]:
    """The future construct path of child ``id``, computed only when an error needs it."""
    return lambda: f"{scope.node.path}/{id}" if scope.node.path else id


def set_kubernetes_version(scope: constructs.Construct, version: str | Target) -> Target:
    """Set the target for every dra-constructs construct under ``scope`` (usually the App).

    Call it before adding charts; a construct's own ``kubernetes_version=`` still wins.
    """
    target = Target.parse(version, f"{scope.node.path or 'App'}: set_kubernetes_version")
    scope.node.set_context(KUBERNETES_VERSION_CONTEXT, str(target))
    return target


#: cdk8s context key for the cluster's DRA-served extended resources (see :func:`set_dra_extended_resources`).
DRA_EXTENDED_RESOURCES_CONTEXT = "dra-constructs/dra-extended-resources"


def set_dra_extended_resources(scope: constructs.Construct, mapping: Mapping[str, str]) -> dict[str, str]:
    """Declare that the cluster serves these extended resources through DRA: ``{name: DeviceClass}``.

    KEP-5004 (Kubernetes 1.34+): NVIDIA's chart sets ``extendedResourceName: nvidia.com/gpu`` on
    ``gpu.nvidia.com`` when it installs resource.k8s.io/v1, so a Pod asking for ``nvidia.com/gpu``
    gets a DRA allocation. The synth-time guardrails then report such requests as DRA010 (any
    device of the class) instead of DRA001, and ``GuardrailsAdmissionPolicy`` admits them. The
    App's target must be 1.34 or later (checked here and at synth).
    """
    from .guardrails.resources import parse_dra_extended_resources

    where = f"{scope.node.path or 'App'}: set_dra_extended_resources"
    checked = parse_dra_extended_resources(dict(mapping), resolve_target(scope, None, where), where)
    scope.node.set_context(DRA_EXTENDED_RESOURCES_CONTEXT, checked)
    return checked


def resolve_dra_extended_resources(scope: constructs.Construct) -> dict[str, str]:
    """The declaration of :func:`set_dra_extended_resources` visible from ``scope`` (empty if none)."""
    value = scope.node.try_get_context(DRA_EXTENDED_RESOURCES_CONTEXT)
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


# App (its node address: jsii may hand out a new proxy for an App created on the JS side, such
# as cdk8s.Testing.app()) -> the inventory set with set_inventory (None: satisfiability checks off).
_INVENTORY_BY_APP: dict[str, Sequence[Device] | None] = {}
_APP_BY_SCOPE: weakref.WeakKeyDictionary[constructs.Construct, str] = weakref.WeakKeyDictionary()


def set_inventory(
    scope: constructs.Construct, inventory: str | Path | Iterable[str | Path] | Sequence[Device] | None
) -> None:
    """Check every claim under ``scope``'s App against these devices instead of the catalog.

    ``inventory``: ResourceSlice files (``kubectl get resourceslices -o yaml``; v1beta1, v1beta2 or
    v1), a list of :class:`dra_constructs.cel.Device`, or ``None`` to turn satisfiability checks off
    (the CEL checks still run). A claim template's own ``inventory=`` still wins.
    """
    from .cel import Device, devices_from_slices, load_resource_slices

    devices: Sequence[Device] | None
    if inventory is None:
        devices = None
    elif isinstance(inventory, (str, Path)):
        devices = tuple(devices_from_slices(load_resource_slices(inventory)))
    else:
        items = list(inventory)
        if all(isinstance(item, Device) for item in items):
            devices = tuple(item for item in items if isinstance(item, Device))
        else:
            devices = tuple(devices_from_slices(load_resource_slices([Path(str(item)) for item in items])))
    _INVENTORY_BY_APP[scope.node.root.node.addr] = devices


def resolve_inventory(scope: constructs.Construct, default: Any) -> Any:
    """The App's inventory from :func:`set_inventory`, else ``default`` (the catalog)."""
    if not _INVENTORY_BY_APP:
        return default
    app = _APP_BY_SCOPE.get(scope)
    if app is None:
        app = scope.node.root.node.addr
        _APP_BY_SCOPE[scope] = app
    return _INVENTORY_BY_APP.get(app, default)
