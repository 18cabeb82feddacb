"""The library's own objects hand their rendered manifest to the synth-time guardrails.

Construct layer (imports cdk8s). A ``GpuPod`` or ``GpuClaimTemplate`` knows its manifest when
it is built: the metadata it passed and the one JSON patch it added. The guardrails used to ask
Node for every object again (``chart.to_json()``: one more resolution of each object in JS and
its JSON marshalled back, ~0.2 ms an object); :func:`chart_manifests` takes the library's dicts
instead and renders through Node only what it cannot vouch for:

- objects of other code (hand-written ``ApiObject``, cdk8s-plus, ``Include``): ``to_json()`` each;
- library objects touched after construction: any access to ``metadata`` (``add_label``,
  ``add_annotation``, ``suppress``) or to ``add_json_patch`` marks the object as modified;
- whole charts whose rendering Python cannot reproduce: nested charts, an App with its own
  resolvers.

Chart labels and namespace are merged the way cdk8s merges them. The list follows the tree's
order; cdk8s orders by dependencies (``add_dependency``) first, which only changes the order of
findings, not which ones. tests/core/test_rendered.py
checks that the dicts equal cdk8s's rendering for every example app and for modified objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cdk8s
import constructs

__all__ = ["OwnManifest", "chart_manifests"]

#: Attribute access that may change an object's JSON after construction.
_MUTATORS = frozenset({"metadata", "add_json_patch"})
_DEFAULT_RESOLVERS = (cdk8s.LazyResolver, cdk8s.ImplicitTokenResolver, cdk8s.NumberStringUnionResolver)


class OwnManifest:
    """Mixin for the library's ``ApiObject`` subclasses: remembers the manifest they were built with.

    ``__getattribute__`` rather than overriding ``metadata``/``add_json_patch``: jsii registers
    overridden members as callbacks, so Node would call into Python on every ``toJson``.
    """

    _dra_manifest: dict[str, Any] | None = None

    def __getattribute__(self, name: str) -> Any:
        if name in _MUTATORS:
            object.__setattr__(self, "_dra_manifest", None)
        return super().__getattribute__(name)

    def _dra_record(self, api_version: str, kind: str, metadata: Mapping[str, Any] | None, name: str,
                    spec: Mapping[str, Any] | None = None, fields: Mapping[str, Any] | None = None) -> None:
        """Remember the manifest: ``metadata`` as passed to cdk8s, ``name``, and the patched ``/spec``.

        ``fields``: other top-level fields the object's one JSON patch added (instead of ``spec``).
        Call it last in ``__init__``, after the object's own ``add_json_patch``.
        """
        manifest: dict[str, Any] = {"apiVersion": api_version, "kind": kind,
                                    "metadata": {**(metadata or {}), "name": name}}
        if spec is not None:
            manifest["spec"] = spec
        if fields:
            manifest.update(fields)
        object.__setattr__(self, "_dra_manifest", manifest)


def _clean(value: Any) -> Any:
    """cdk8s's ``sanitizeValue`` with ``filterEmptyArrays``/``filterEmptyObjects`` (metadata)."""
    if isinstance(value, dict):
        cleaned = {k: c for k, v in value.items() if (c := _clean(v)) is not None}
        return cleaned or None
    if isinstance(value, list):
        return [_clean(v) for v in value] if value else None
    return value


def _with_chart_defaults(manifest: dict[str, Any], labels: Mapping[str, str], namespace: str | None) -> dict[str, Any]:
    metadata = dict(manifest["metadata"])
    if labels:
        metadata["labels"] = {**labels, **(metadata.get("labels") or {})}
    if namespace is not None and metadata.get("namespace") is None:
        metadata["namespace"] = namespace
    return {**manifest, "metadata": _clean(metadata)}


def _python_renderable(root: constructs.Construct) -> bool:
    resolvers = getattr(root, "resolvers", None)
    return resolvers is None or all(isinstance(r, _DEFAULT_RESOLVERS) for r in resolvers)


def chart_manifests(chart: cdk8s.Chart, root: constructs.Construct) -> list[Any]:
    """The chart's manifests as ``chart.to_json()`` renders them, with the library's own dicts where valid."""
    children = chart.node.find_all()
    api_objects: list[cdk8s.ApiObject] = []
    own = 0
    for child in children:
        if isinstance(child, cdk8s.Chart) and child is not chart:
            return list(chart.to_json())  # nested chart: its objects are its own
        if isinstance(child, cdk8s.ApiObject):
            api_objects.append(child)
            own += getattr(child, "_dra_manifest", None) is not None
    if own == 0 or not _python_renderable(root):
        return list(chart.to_json())
    labels: Mapping[str, str] = chart.labels or {}
    namespace = chart.namespace
    manifests: list[Any] = []
    for obj in api_objects:
        manifest = getattr(obj, "_dra_manifest", None)
        if manifest is None:
            manifests.append(obj.to_json())
        else:
            manifests.append(_with_chart_defaults(manifest, labels, namespace))
    return manifests
