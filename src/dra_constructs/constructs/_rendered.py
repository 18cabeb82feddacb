"""The library's own objects render their manifests in Python: one jsii call each instead of three.

Construct layer (imports cdk8s). A ``GpuPod`` or ``GpuClaimTemplate`` knows its manifest when it
is built: the metadata it passed to cdk8s and its ``/spec``. Instead of handing the spec to Node
as a JSON patch (``JsonPatch.add`` and ``add_json_patch``: two jsii round trips an object), it
keeps it in Python and overrides ``to_json``: cdk8s asks for it once, at synth. The guardrails
read the same dicts (:func:`chart_manifests`) and Node renders only what Python cannot vouch for:

- objects of other code (hand-written ``ApiObject``, cdk8s-plus, ``Include``): ``to_json()`` each;
- library objects touched after construction: the first access to ``metadata`` or
  ``add_json_patch`` (``add_label``, ``add_annotation``, ``suppress``, a user's patch) first
  gives Node the deferred spec patch, then hands rendering back to cdk8s for good;
- objects whose rendering Python cannot reproduce: an App with its own resolvers (also a Python
  subclass of a default one), no ``cdk8s.App`` at the root, ``CDK8S_DISABLE_SORT`` set, a spec
  holding values that are not plain JSON (a ``datetime``, a jsii object, a tuple: handed to Node
  at construction); NaN, infinities and ``'__proto__'`` keys, which jsii cannot send, are a
  ``DraConstructsError`` at construction;
- objects of a user's subclass that overrides ``to_json``: the guardrails read what it returns;
- whole charts with nested charts (guardrails only: ``chart.to_json()``).

The Python rendering is cdk8s's ``ApiObject.toJson`` for plain JSON values: chart labels and
namespace merged as the ApiObject constructor merges them, metadata sanitized (empty and null
values dropped, keys sorted as JavaScript sorts them), then ``apiVersion``, ``kind``,
``metadata`` and the patched fields in patch order. tests/core/test_rendered.py checks that the
YAML is byte-identical to cdk8s's own rendering (``cdk8s_rendering()``) for every example app,
target and the edge cases; tests/core/test_rendered_adversarial.py holds a review's attempts to
make them differ.
"""

from __future__ import annotations

import enum
import functools
import inspect
import math
import os
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

import cdk8s
import constructs
import jsii

from dra_constructs.constructs import _jsii_shortcuts
from dra_constructs.constructs._jsii_shortcuts import WIRE_KEY_PREFIX, callback_answer, is_node_callback
from dra_constructs.errors import DraConstructsError

__all__ = ["OwnManifest", "cdk8s_rendering", "chart_manifests"]

# Exact types: a Python subclass of LazyResolver (say) can replace values, which Python would not do.
_DEFAULT_RESOLVERS = (cdk8s.LazyResolver, cdk8s.ImplicitTokenResolver, cdk8s.NumberStringUnionResolver)
_MAX_ARRAY_INDEX = 2**32 - 2  # JavaScript enumerates array-index keys first, in numeric order
_PROTO = "__proto__"
#: What Python renders itself: JSON scalars (``str`` covers str enums, ``int`` bools and int enums).
_SCALARS = (str, int, float, type(None))


class _Switch:
    python_rendering = True


@contextmanager
def cdk8s_rendering() -> Iterator[None]:
    """Within the block, the library's objects render through cdk8s (Node), as plain ApiObjects do.

    For tests and for debugging a suspected difference: the output must be byte-identical.
    """
    previous, _Switch.python_rendering = _Switch.python_rendering, False
    try:
        yield
    finally:
        _Switch.python_rendering = previous


@dataclass(frozen=True)
class _ChartDefaults:
    """What cdk8s merges into an object's metadata, and whether Python can render it at all."""

    labels: Mapping[str, str]
    namespace: str | None
    python_renderable: bool
    wire: bool  # no label key that jsii's kernel would read as a wire token (see _jsii_shortcuts.py)


_DEFAULTS: weakref.WeakKeyDictionary[constructs.Construct, _ChartDefaults] = weakref.WeakKeyDictionary()


def _chart_defaults(scope: constructs.Construct) -> _ChartDefaults:
    """The nearest chart's labels and namespace and the App's resolvers (fixed at construction), per scope."""
    cached = _DEFAULTS.get(scope)
    if cached is None:
        chart = cdk8s.Chart.of(scope)
        # A chart class overriding ``labels``/``namespace`` may answer differently later: cdk8s merged
        # them when each object was built, this cache reads them once at synth. cdk8s renders those.
        own_defaults = type(chart).labels is cdk8s.Chart.labels and type(chart).namespace is cdk8s.Chart.namespace
        labels = dict(chart.labels or {})
        cached = _ChartDefaults(labels, chart.namespace, own_defaults and _python_renderable(scope.node.root),
                                not any(str(key).startswith(WIRE_KEY_PREFIX) for key in labels))
        _DEFAULTS[scope] = cached
    return cached


class OwnManifest:
    """Mixin for the library's ``ApiObject`` subclasses: keeps the manifest and renders it in Python.

    Any access to ``metadata`` or ``add_json_patch`` hands rendering to cdk8s for good (see
    :func:`_install_materializing`). Node-side code changing the object is not seen.
    """

    _dra_manifest: dict[str, Any] | None = None
    _dra_patches: tuple[tuple[str, Any], ...] = ()
    _dra_scope: constructs.Construct | None = None
    # the manifest with the chart's defaults, rendered once: the rules read it, to_json copies it
    _dra_rendered: dict[str, Any] | None = None
    # no key that jsii's kernel reads as a wire token: Node may get the rendering as is (_jsii_shortcuts.py)
    _dra_wire: bool = True

    def _dra_create(self, scope: constructs.Construct, id: str, api_version: str, kind: str,
                    metadata: Mapping[str, Any] | None) -> None:
        """cdk8s's ``ApiObject.__init__``: the same one jsii ``create``, without the generated code's typeguard.

        The generated ``ApiObject.__init__``, ``ApiObjectProps`` and ``ApiObjectMetadata`` check
        each argument with typeguard (~0.2 ms a workload, more than the create's own Python);
        the library has checked these values itself (``object_metadata``: name, namespace,
        labels, annotations). The props go as a map, which jsii's kernel deserializes into the
        ``ApiObjectProps`` struct (with ``ApiObjectMetadata`` inside) as it does a wired struct.
        """
        if not isinstance(scope, constructs.Construct):  # what the generated checks refused
            raise TypeError(f"argument scope must be constructs.Construct; got {type(scope).__name__} instead")
        if not isinstance(id, str):
            raise TypeError(f"argument id must be str; got {type(id).__name__} instead")
        props: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
        if metadata is not None:
            props["metadata"] = dict(metadata)
        jsii.create(type(self), self, [scope, id, props])

    def _dra_record(self, scope: constructs.Construct, api_version: str, kind: str,
                    metadata: Mapping[str, Any] | None, name: str, spec: Mapping[str, Any] | None = None,
                    fields: Mapping[str, Any] | None = None) -> None:
        """Keep the manifest: ``metadata`` as passed to cdk8s, ``name``, ``spec`` and other top-level ``fields``.

        Call it last in ``__init__`` instead of adding ``/spec`` (and ``fields``) as JSON patches:
        Node gets them only if something later needs cdk8s's own rendering.
        """
        manifest: dict[str, Any] = {"apiVersion": api_version, "kind": kind,
                                    "metadata": {**(metadata or {}), "name": name}}
        patches = ([("spec", spec)] if spec is not None else []) + list((fields or {}).items())
        manifest.update(patches)
        object.__setattr__(self, "_dra_patches", tuple(patches))
        object.__setattr__(self, "_dra_scope", scope)
        object.__setattr__(self, "_dra_rendered", None)
        bad = _not_plain_json(manifest)
        wire = True
        if bad is not None and isinstance(bad[1], str) and bad[1].startswith(WIRE_KEY_PREFIX):
            wire = False  # a '$jsii.' key: plain JSON, answered to Node through jsii's own marshalling
            bad = _not_plain_json(manifest, wire_keys=True)
        object.__setattr__(self, "_dra_wire", wire)
        if bad is None:
            object.__setattr__(self, "_dra_manifest", manifest)
            return
        path, value = bad
        if isinstance(value, float):  # jsii cannot send NaN/Infinity to Node: it fails with a JSON SyntaxError
            raise DraConstructsError(cast(Any, self).node.path, path.lstrip("."), value,
                                     "not a JSON number (NaN and infinities have no JSON form)",
                                     "use a finite number, or a string if the API field takes one")
        if isinstance(value, enum.Enum):  # jsii marshals an enum member as a jsii enum (AttributeError at synth)
            raise DraConstructsError(cast(Any, self).node.path, path.lstrip("."), value,
                                     "a Python enum member, not a JSON value", f"pass its value ({value.value!r})")
        if value == _PROTO:  # jsii refuses the key in either rendering (a SerializationError at synth)
            raise DraConstructsError(cast(Any, self).node.path, path.lstrip("."), value,
                                     "jsii cannot pass a '__proto__' key to Node", "remove the key")
        # A datetime, a jsii object...: cdk8s's JSON patch turns it to JSON (a Date to an ISO string)
        # and Python would hand it over as is. Let cdk8s render this object, as a plain ApiObject.
        _materialize(self)

    def to_json(self) -> Any:
        """The manifest (called by cdk8s at synth; a jsii override).

        Node gets the rendering itself, as JSON (``_jsii_shortcuts.callback_answer``); a Python
        caller gets its own copy.
        """
        rendered = _python_rendering(self)
        if rendered is None:
            _materialize(self)
            return cdk8s.ApiObject.to_json(self)  # type: ignore[arg-type]
        if self._dra_wire and is_node_callback():  # Node asks: it reads the rendering, nobody keeps it
            answer = callback_answer(rendered)
            if answer is not None:
                return answer
        return _json_copy(rendered)  # a fresh document each call, as cdk8s returns (~7 us)


# jsii answers each callback after ``inspect.signature(obj.to_json)`` (jsii/_kernel/__init__.py,
# ``_handle_callback``: it looks for keyword-only parameters). A stored signature skips the
# introspection of the function (42 -> 28 us per callback, two per workload); subclasses that
# override ``to_json`` are introspected as before.
OwnManifest.to_json.__signature__ = inspect.signature(OwnManifest.to_json)  # type: ignore[attr-defined]


def _not_plain_json(value: Any, wire_keys: bool = False) -> tuple[str, Any] | None:
    """The first value in ``value`` that is not plain JSON, with its path (``.spec.x[0]``), or ``None``.

    A key starting with ``$jsii.`` counts as not plain (the key is returned) unless ``wire_keys``.
    """
    found = _first_not_plain(value, wire_keys)
    if found is None:
        return None
    steps, bad = found
    return "".join(reversed(steps)), bad


def _first_not_plain(value: Any, wire_keys: bool) -> tuple[list[str], Any] | None:
    """The first value that is not plain JSON, with its path steps innermost first.

    Steps are only built on the way back from a find: the walk over a clean manifest (every
    object, at construction) formats no path.
    """
    if isinstance(value, str):
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str) or key == _PROTO or (not wire_keys and key.startswith(WIRE_KEY_PREFIX)):
                return [f".{key!r}"], key
            if (found := _first_not_plain(item, wire_keys)) is not None:
                found[0].append(f".{key}")
                return found
        return None
    if isinstance(value, list):  # not a tuple: jsii cannot send one inside a map (cdk8s fails at construction)
        for i, item in enumerate(value):
            if (found := _first_not_plain(item, wire_keys)) is not None:
                found[0].append(f"[{i}]")
                return found
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return [], value
    if isinstance(value, enum.Enum) and not isinstance(value, str):  # an IntEnum is an int jsii cannot send
        return [], value
    return None if isinstance(value, _SCALARS) else ([], value)


# cdk8s's own implementations (``__wrapped__``: the module may be imported again, e.g. by a reload).
_ADD_JSON_PATCH: Any = inspect.unwrap(cdk8s.ApiObject.add_json_patch)
_METADATA: Any = inspect.unwrap(vars(cdk8s.ApiObject)["metadata"].fget)


def _install_materializing() -> None:
    """``cdk8s.ApiObject.metadata`` / ``add_json_patch`` materialize an :class:`OwnManifest` first.

    On cdk8s's class, not as members of ``OwnManifest``: ``super().metadata`` in a user's subclass
    and ``cdk8s.ApiObject.add_json_patch(pod, ...)`` bypass those (the label or patch was lost from
    the Python rendering). Not an override either: jsii registers overridden members as callbacks,
    so Node would call into Python on every access. ``functools.wraps`` keeps ``__jsii_name__``,
    which jsii reads to register a user's own overrides of these members.
    """

    @functools.wraps(_ADD_JSON_PATCH)
    def add_json_patch(self: cdk8s.ApiObject, *ops: cdk8s.JsonPatch) -> None:
        if isinstance(self, OwnManifest):
            _materialize(self)
        _ADD_JSON_PATCH(self, *ops)

    @functools.wraps(_METADATA)
    def metadata(self: cdk8s.ApiObject) -> cdk8s.ApiObjectMetadataDefinition:
        if isinstance(self, OwnManifest):
            _materialize(self)
        return cast(cdk8s.ApiObjectMetadataDefinition, _METADATA(self))

    setattr(cdk8s.ApiObject, "add_json_patch", add_json_patch)  # noqa: B010 (mypy: assigning to a method)
    setattr(cdk8s.ApiObject, "metadata", property(metadata))  # noqa: B010


def _materialize(obj: OwnManifest) -> None:
    """Give Node the deferred patches; from now on cdk8s renders ``obj`` (its metadata may change).

    State changes only once Node has the patches: when jsii refuses one, the next synth must fail
    again, not render the object without its spec (the guardrails swallow a RuntimeError).
    """
    patches = object.__getattribute__(obj, "_dra_patches")
    if patches:
        _ADD_JSON_PATCH(obj, *[cdk8s.JsonPatch.add(f"/{key}", value) for key, value in patches])
        object.__setattr__(obj, "_dra_patches", ())
    object.__setattr__(obj, "_dra_manifest", None)
    object.__setattr__(obj, "_dra_rendered", None)


def _python_rendering(obj: OwnManifest) -> dict[str, Any] | None:
    """``obj``'s manifest as cdk8s renders it, or ``None`` where Python cannot vouch for it."""
    manifest = obj._dra_manifest
    scope = obj._dra_scope
    if manifest is None or scope is None or not _Switch.python_rendering or os.environ.get("CDK8S_DISABLE_SORT"):
        return None
    defaults = _chart_defaults(scope)
    if not defaults.python_renderable:
        return None
    rendered = obj._dra_rendered
    if rendered is None:  # the chart's labels and namespace are fixed per scope (_chart_defaults)
        rendered = _with_chart_defaults(manifest, defaults.labels, defaults.namespace)
        object.__setattr__(obj, "_dra_rendered", rendered)
        if not defaults.wire:
            object.__setattr__(obj, "_dra_wire", False)
    return rendered


def _json_copy(value: Any) -> Any:
    """A copy of a JSON document (dicts and lists copied, scalars shared)."""
    if isinstance(value, dict):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_copy(v) for v in value]
    return value


def _js_key(key: str) -> tuple[int, int, bytes]:
    """Sort key of JavaScript's ``Object.keys(o).sort()`` as the object then enumerates them."""
    if key.isascii() and key.isdigit() and (key == "0" or key[0] != "0") and int(key) <= _MAX_ARRAY_INDEX:
        return (0, int(key), b"")
    return (1, 0, key.encode("utf-16-be"))


def _clean(value: Any) -> Any:
    """cdk8s's ``sanitizeValue`` with ``filterEmptyArrays``/``filterEmptyObjects`` and sorted keys (metadata)."""
    if isinstance(value, dict):
        cleaned = {k: c for k in sorted(value, key=_js_key) if (c := _clean(value[k])) is not None}
        return cleaned or None
    if isinstance(value, list):
        return [_clean(v) for v in value] if value else None
    return value


def _with_chart_defaults(manifest: dict[str, Any], labels: Mapping[str, str], namespace: str | None) -> dict[str, Any]:
    """The ApiObject constructor's merge (chart labels under the object's, the chart's namespace as default)."""
    metadata = dict(manifest["metadata"])
    if labels:
        metadata["labels"] = {**labels, **(metadata.get("labels") or {})}
    if namespace is not None and metadata.get("namespace") is None:
        metadata["namespace"] = namespace
    return {**manifest, "metadata": _clean(metadata)}


def _python_renderable(root: constructs.IConstruct) -> bool:
    """An App with cdk8s's resolvers only (no App at the root: cdk8s fails, Python must not render)."""
    return isinstance(root, cdk8s.App) and all(type(r) in _DEFAULT_RESOLVERS for r in root.resolvers)


def chart_manifests(chart: cdk8s.Chart, root: constructs.Construct) -> list[Any]:
    """The chart's manifests as ``chart.to_json()`` renders them, with the library's own dicts where valid."""
    api_objects: list[cdk8s.ApiObject] = []
    own = 0
    for child in chart.node.find_all():
        if isinstance(child, cdk8s.Chart) and child is not chart:
            return list(chart.to_json())  # nested chart: its objects are its own
        if isinstance(child, cdk8s.ApiObject):
            api_objects.append(child)
            own += isinstance(child, OwnManifest)
    if own == 0:
        return list(chart.to_json())  # one jsii call for the chart instead of one per object
    manifests: list[Any] = []
    for obj in api_objects:
        # A user's subclass overriding to_json changes what is synthesized: the guardrails read that.
        rendered = None
        if isinstance(obj, OwnManifest) and getattr(type(obj), "to_json", None) is OwnManifest.to_json:
            rendered = _python_rendering(obj)
        manifests.append(obj.to_json() if rendered is None else rendered)
    return manifests


_install_materializing()
_jsii_shortcuts.install()
