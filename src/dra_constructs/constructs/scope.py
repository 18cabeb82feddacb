"""Construct-layer helpers: the app-wide target version and lazy construct paths."""

from __future__ import annotations

import hashlib
import re
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import constructs

from dra_constructs.errors import DraConstructsError
from dra_constructs.target import Target

if TYPE_CHECKING:
    from dra_constructs.catalog.driver_versions import NvidiaDriverRelease
    from dra_constructs.cel import Device
    from dra_constructs.fit import Inventory

__all__ = [
    "DRA_EXTENDED_RESOURCES_CONTEXT",
    "KUBERNETES_VERSION_CONTEXT",
    "KUEUE_COMPATIBLE_CONTEXT",
    "AppSettings",
    "app_settings",
    "duplicate_id",
    "generated_name",
    "lazy_path",
    "object_name",
    "resolve_dra_extended_resources",
    "resolve_inventory",
    "resolve_kueue_compatible",
    "resolve_mig_mode",
    "resolve_nvidia_driver",
    "resolve_target",
    "set_dra_extended_resources",
    "set_inventory",
    "set_kubernetes_version",
    "set_kueue_compatible",
    "set_mig_mode",
    "set_nvidia_driver_version",
]

#: cdk8s context key for the app-wide target (see :func:`set_kubernetes_version`).
KUBERNETES_VERSION_CONTEXT = "dra-constructs/kubernetes-version"
#: cdk8s context key for the NVIDIA DRA driver release (see :func:`set_nvidia_driver_version`).
NVIDIA_DRIVER_CONTEXT = "dra-constructs/nvidia-driver-version"
#: cdk8s context key for the shape of the catalog inventory (see :func:`set_mig_mode`).
MIG_MODE_CONTEXT = "dra-constructs/mig-mode"

class AppSettings:
    """The dra-constructs settings (cdk8s context) visible from one scope, read in one jsii call.

    Constructs resolve these once (:func:`app_settings`) and hand the plain values to the core.
    Context is per node (a chart may set its own before it has children), so the record is per
    scope; an App whose constructs share a chart reads its context once.
    """

    __slots__ = ("_target", "context")

    def __init__(self, context: Mapping[str, Any]) -> None:
        self.context = context
        self._target: Target | None = None

    @property
    def target(self) -> Target:
        """``dra-constructs/kubernetes-version`` (default 1.32); parsed on first use, so a bad value
        fails only constructs that rely on it."""
        if self._target is None:
            self._target = Target.parse(self.context.get(KUBERNETES_VERSION_CONTEXT),
                                        f"context {KUBERNETES_VERSION_CONTEXT}")
        return self._target

    @property
    def mig_mode(self) -> str | None:
        """``dra-constructs/mig-mode`` (``None``: the target's default)."""
        value = self.context.get(MIG_MODE_CONTEXT)
        return str(value) if value else None

    @property
    def kueue_compatible(self) -> bool:
        """``dra-constructs/kueue-compatible`` (default off)."""
        return self.context.get(KUEUE_COMPATIBLE_CONTEXT) is True

    @property
    def nvidia_driver(self) -> str | None:
        """``dra-constructs/nvidia-driver-version`` as set (``None``: the newest release)."""
        value = self.context.get(NVIDIA_DRIVER_CONTEXT)
        return str(value) if value else None

    @property
    def dra_extended_resources(self) -> dict[str, str]:
        """``dra-constructs/dra-extended-resources`` (empty if none)."""
        value = self.context.get(DRA_EXTENDED_RESOURCES_CONTEXT)
        return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


# scope -> its settings. Every setter clears it: a record read before a setter ran is stale.
_SETTINGS: weakref.WeakKeyDictionary[constructs.Construct, AppSettings] = weakref.WeakKeyDictionary()


def app_settings(scope: constructs.Construct) -> AppSettings:
    """The settings visible from ``scope``: one ``getAllContext`` jsii call per scope, then a dict lookup.

    ``getAllContext`` merges the context of the scope and its ancestors as ``tryGetContext`` reads
    it key by key (constructs' ``Node``: the nearest scope's value wins).
    """
    cached = _SETTINGS.get(scope)
    if cached is None:
        context = scope.node.get_all_context()
        cached = AppSettings(dict(context) if isinstance(context, Mapping) else {})
        _SETTINGS[scope] = cached
    return cached


def resolve_target(scope: constructs.Construct, override: str | Target | None, where: str) -> Target:
    """``override`` if given, else the scope's ``dra-constructs/kubernetes-version`` context, else 1.32."""
    if override is not None:
        return Target.parse(override, where)
    return app_settings(scope).target


def lazy_path(scope: constructs.Construct, id: str) -> Callable[[], str]:
    """The future construct path of child ``id``, computed only when an error needs it.

    Also the first check of every construct: ``scope`` must be a construct, ``id`` a non-empty string.
    """
    if not isinstance(scope, constructs.Construct):
        raise DraConstructsError(str(id), "scope", scope, f"must be a construct (a cdk8s Chart), not "
                                 f"{type(scope).__name__}", "pass the chart first: GpuPod(chart, 'id', ...)")
    if not isinstance(id, str) or not id:
        raise DraConstructsError(scope.node.path or "App", "id", id, "a construct id is a non-empty string",
                                 "pass an id such as 'llm-server' (it names the object)")
    return lambda: f"{scope.node.path}/{id}" if scope.node.path else id


def duplicate_id(error: RuntimeError, where: str | Callable[[], str], id: str) -> DraConstructsError | RuntimeError:
    """jsii's "There is already a Construct with name ..." as a DraConstructsError (else ``error``)."""
    if "already a Construct with name" not in str(error):
        return error
    path = where if isinstance(where, str) else where()
    return DraConstructsError(path, "id", id, "another construct in this scope already has this id",
                              "give every construct of a chart its own id")


def set_kubernetes_version(scope: constructs.Construct, version: str | Target) -> Target:
    """Set the target for every dra-constructs construct under ``scope`` (usually the App).

    Call it before adding charts; a construct's own ``kubernetes_version=`` still wins.
    """
    where = scope.node.path or "App"
    target = Target.parse(version, f"{where}: set_kubernetes_version")
    try:
        scope.node.set_context(KUBERNETES_VERSION_CONTEXT, str(target))
        _SETTINGS.clear()
    except RuntimeError:  # jsii: "Cannot set context after children have been added"
        children = ", ".join(c.node.id for c in scope.node.children)
        raise DraConstructsError(
            where, "set_kubernetes_version", str(target),
            f"cdk8s fixes the context once children exist (it already has {children})",
            "call set_kubernetes_version(app, ...) right after cdk8s.App(), before creating charts "
            "(or pass kubernetes_version= to each construct)",
        ) from None
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
    from dra_constructs.guardrails.resources import parse_dra_extended_resources

    where = f"{scope.node.path or 'App'}: set_dra_extended_resources"
    checked = parse_dra_extended_resources(dict(mapping), resolve_target(scope, None, where), where)
    scope.node.set_context(DRA_EXTENDED_RESOURCES_CONTEXT, checked)
    _SETTINGS.clear()
    return checked


def resolve_dra_extended_resources(scope: constructs.Construct) -> dict[str, str]:
    """The declaration of :func:`set_dra_extended_resources` visible from ``scope`` (empty if none)."""
    return app_settings(scope).dra_extended_resources


def set_mig_mode(scope: constructs.Construct, mode: str | None) -> None:
    """Check claims under ``scope`` against the catalog in this MIG shape.

    ``"dynamic"``: DynamicMIG (every placement a device consuming the GPU's counters; needs 1.33+),
    ``"static"``: pre-created MIG devices; ``None``: the target's default (dynamic from 1.36).
    A template's own ``mig_mode=`` still wins.
    """
    if mode is not None and mode not in ("dynamic", "static"):
        raise DraConstructsError(f"{scope.node.path or 'App'}: set_mig_mode", "mode", mode, "not a MIG inventory shape",
                                 'write "dynamic" or "static"')
    scope.node.set_context(MIG_MODE_CONTEXT, mode or "")
    _SETTINGS.clear()


def set_nvidia_driver_version(scope: constructs.Construct, version: str) -> NvidiaDriverRelease:
    """Declare the NVIDIA DRA driver release the cluster runs (``"25.8"``, ``"0.4"``, ``"main"``).

    Claims checked against the catalog then refuse alignments that release cannot meet (e.g.
    ``numaNode``: no release up to v0.4 publishes it on GPUs). Default: the newest release.
    """
    from dra_constructs.catalog.driver_versions import nvidia_driver_release

    where = f"{scope.node.path or 'App'}: set_nvidia_driver_version"
    release = nvidia_driver_release(version, where)
    try:
        scope.node.set_context(NVIDIA_DRIVER_CONTEXT, release.semver)
        _SETTINGS.clear()
    except RuntimeError:  # jsii: "Cannot set context after children have been added"
        raise DraConstructsError(where, "version", version, "cdk8s fixes the context once children exist",
                                 "call set_nvidia_driver_version(app, ...) right after cdk8s.App()") from None
    return release


def resolve_nvidia_driver(scope: constructs.Construct) -> NvidiaDriverRelease:
    """The release of :func:`set_nvidia_driver_version` visible from ``scope``, else the default."""
    from dra_constructs.catalog.driver_versions import nvidia_driver_release

    return nvidia_driver_release(app_settings(scope).nvidia_driver, f"context {NVIDIA_DRIVER_CONTEXT}")


def resolve_mig_mode(scope: constructs.Construct) -> str | None:
    """The scope's ``dra-constructs/mig-mode`` context (``None``: the target's default)."""
    return app_settings(scope).mig_mode


# App (its node address and outdir, see _app_key; not the proxy: jsii may hand out a new proxy for an
# App created on the JS side, such as cdk8s.Testing.app()) -> the inventory set with set_inventory
# (None: satisfiability checks off).
_INVENTORY_BY_APP: dict[str, Inventory | Sequence[Device] | None] = {}
_APP_BY_SCOPE: weakref.WeakKeyDictionary[constructs.Construct, str] = weakref.WeakKeyDictionary()


def set_inventory(
    scope: constructs.Construct, inventory: str | Path | Iterable[str | Path] | Sequence[Device] | Inventory | None
) -> None:
    """Check every claim under ``scope``'s App against these devices instead of the catalog.

    ``inventory``: ResourceSlice files (``kubectl get resourceslices -o yaml``; v1beta1, v1beta2 or
    v1; shared counters, taints and node selection are read as they are), a list of
    :class:`dra_constructs.cel.Device`, or ``None`` to turn satisfiability checks off (the CEL
    checks still run). A claim template's own ``inventory=`` still wins.
    """
    from dra_constructs.cel import Device, load_resource_slices
    from dra_constructs.fit import Inventory

    devices: Inventory | Sequence[Device] | None
    if inventory is None:
        devices = None
    elif isinstance(inventory, Inventory):
        devices = inventory
    elif isinstance(inventory, (str, Path)):
        devices = Inventory.from_slices(load_resource_slices(inventory))
    else:
        items = list(inventory)
        if all(isinstance(item, Device) for item in items):
            devices = tuple(item for item in items if isinstance(item, Device))
        else:
            devices = Inventory.from_slices(load_resource_slices([Path(str(item)) for item in items]))
    _INVENTORY_BY_APP[_app_key(scope)] = devices


def _app_key(scope: constructs.Construct) -> str:
    """Which App ``scope`` is in: every root has the same ``addr``, so its ``outdir`` tells Apps apart
    (``cdk8s.Testing.app()`` gives each a fresh directory)."""
    root = scope.node.root
    return f"{root.node.addr}:{getattr(root, 'outdir', '')}"


def resolve_inventory(scope: constructs.Construct, default: Any) -> Any:
    """The App's inventory from :func:`set_inventory`, else ``default`` (the catalog)."""
    if not _INVENTORY_BY_APP:
        return default
    app = _APP_BY_SCOPE.get(scope)
    if app is None:
        app = _app_key(scope)
        _APP_BY_SCOPE[scope] = app
    return _INVENTORY_BY_APP.get(app, default)


# cdk8s derives metadata.name from the construct path but keeps '_' and '.' (it only lowercases),
# which the API server rejects in DNS-1123 names. Ids made of these characters are safe.
_SAFE_ID = re.compile(r"^[A-Za-z0-9-]+$")
_SCOPE_IS_SAFE: weakref.WeakKeyDictionary[constructs.Construct, tuple[bool, str]] = weakref.WeakKeyDictionary()


def generated_name(scope: constructs.Construct, id: str, max_length: int = 63) -> str | None:
    """``None`` when cdk8s's generated name for child ``id`` is valid, else a valid DNS-1123 name.

    The derived name has cdk8s's shape (path components joined by '-', an 8-character hash of the
    full path) with every character outside ``[a-z0-9-]`` replaced. Costs no jsii call when the id
    and the scope's path are safe (checked once per scope).
    """
    cached = _SCOPE_IS_SAFE.get(scope)
    if cached is None:
        path = scope.node.path
        cached = (all(_SAFE_ID.match(part) for part in path.split("/") if part), path)
        _SCOPE_IS_SAFE[scope] = cached
    if cached[0] and _SAFE_ID.match(id):
        return None
    path = f"{cached[1]}/{id}" if cached[1] else id
    digest = hashlib.sha256(path.encode()).hexdigest()[:8]
    body = re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", "-".join(p for p in path.lower().split("/") if p)))
    body = body[-(max_length - 9):].strip("-")
    return f"{body}-{digest}" if body else digest


# scope -> (its path, whether cdk8s's names of its children are predicted in Python), decided on
# the scope's first object by comparing the prediction with cdk8s's answer (one jsii call).
_NAMING: weakref.WeakKeyDictionary[constructs.Construct, tuple[str, bool]] = weakref.WeakKeyDictionary()
_PREDICTABLE_ID = re.compile(r"^[A-Za-z0-9._-]+$")


def object_name(obj: Any, scope: constructs.Construct, id: str) -> str:
    """``obj.name`` (an ``ApiObject`` built as child ``id`` of ``scope`` without an explicit name).

    Computed in Python (:mod:`dra_constructs.constructs._names`) instead of a jsii round trip once the
    scope's first object showed that the prediction equals cdk8s's name (a chart that disables
    name hashes or overrides ``generate_object_name`` fails that check and keeps asking cdk8s).
    """
    from dra_constructs.constructs._names import to_dns_label

    state = _NAMING.get(scope)
    if state is None:
        actual = str(obj.name)
        path = scope.node.path
        chart = cdk8s_chart_of(scope)
        predictable = (
            chart is not None and path.isascii() and bool(_PREDICTABLE_ID.match(id))
            and getattr(type(chart), "generate_object_name", None) is _DEFAULT_GENERATE
            and to_dns_label(f"{path}/{id}" if path else id, ["", *path.split("/"), id] if path else ["", id]) == actual
        )
        _NAMING[scope] = (path, predictable)
        return actual
    path, predictable = state
    if predictable and _PREDICTABLE_ID.match(id):
        return to_dns_label(f"{path}/{id}" if path else id, ["", *path.split("/"), id] if path else ["", id])
    return str(obj.name)


def cdk8s_chart_of(scope: constructs.Construct) -> Any:
    """The chart ``scope`` belongs to (``None`` outside a chart)."""
    import cdk8s

    try:
        return cdk8s.Chart.of(scope)
    except RuntimeError:
        return None


def _default_generate() -> Any:
    import cdk8s

    return cdk8s.Chart.generate_object_name


_DEFAULT_GENERATE = _default_generate()


#: cdk8s context key: every claim template under the scope must be admissible by Kueue.
KUEUE_COMPATIBLE_CONTEXT = "dra-constructs/kueue-compatible"


def set_kueue_compatible(scope: constructs.Construct, enabled: bool = True) -> None:
    """Make every ``GpuClaimTemplate`` under ``scope`` Kueue-admissible (checked at construction).

    A template's own ``kueue_compatible=`` still wins. Kueue's DRA integration needs 1.34+.
    """
    scope.node.set_context(KUEUE_COMPATIBLE_CONTEXT, bool(enabled))
    _SETTINGS.clear()


def resolve_kueue_compatible(scope: constructs.Construct, override: bool | None) -> bool:
    """``override`` if given, else the scope's ``dra-constructs/kueue-compatible`` context (default off)."""
    if override is not None:
        return bool(override)
    return app_settings(scope).kueue_compatible
