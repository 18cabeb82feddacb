"""Two shortcuts through jsii's Python runtime for the library's own objects; output unchanged.

Construct layer (imports jsii; relies on internals of jsii's Python runtime, each checked where it
is used: where one differs, that shortcut is off and jsii's ordinary path runs).

**Answers to Node as JSON** (:func:`callback_answer`). When Node asks a library object for its
manifest (cdk8s's ``toJson``, one callback per object at synth), jsii walks the answer three
times before writing it: ``_make_reference_for_native`` wraps every dict in ``$jsii.map``,
cattrs unstructures every value again, then ``json.dumps`` encodes it. For a manifest the
library has checked to be plain JSON (``_rendered._not_plain_json``: str keys, none of them
``$jsii.*``; str, number, bool, null, list and dict values) the first two walks add only the
``$jsii.map`` wrappers, which tell Node's kernel that a plain object is a map: without them the
kernel deserializes the object by value (``serialization.ts``, ``Any.deserialize``: the same
``mapValues`` over the same keys; a ``$jsii.*`` key is the only thing it reads differently, and
such manifests never get here). The manifest goes in a :class:`_Document`, which the first walk
returns as is (a ``__jsii_type__``, no struct mapping), and an unstructure hook on jsii's
converter hands ``json.dumps`` the dict itself (on when jsii's first walk returns a ``_Document``
unchanged and the hook answers it). Only answers to Node go this way (the caller is
jsii's callback handler); Python callers of ``to_json`` get their own copy as before.

**Override discovery once per class** (:func:`install`). Each ``jsii.create`` looks for the
Python methods that override jsii members (``_get_overides``: the class's MRO against the jsii
class, 40-140 us a create); for a library class the answer never changes (``to_json``), so it
is kept per class (as for jsii's own classes, which have none). A class with a base defined
outside the library before the jsii class (a user's subclass) is looked at on every create, as
before. A method added to a library class after its first object is not seen (nothing does that).
A jsii whose ``_get_overides`` takes other parameters than ``(klass, obj)`` is left as it is.

Tests: tests/core/test_jsii_shortcuts.py, and the byte-for-byte comparisons of
tests/core/test_rendered.py and tests/core/test_examples.py.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

import jsii
import jsii._kernel

__all__ = ["WIRE_KEY_PREFIX", "callback_answer", "install", "is_node_callback"]

#: Keys jsii's kernel reads as wire tokens (``$jsii.map``, ``$jsii.byref``, ``$jsii.date``...).
WIRE_KEY_PREFIX = "$jsii."
_LIBRARY = "dra_constructs."

#: jsii's handler of Node's callbacks: ``to_json`` called from it answers Node.
_CALLBACK_CODE = getattr(getattr(jsii._kernel, "_handle_callback", None), "__code__", None)


class _Document:
    """A checked plain-JSON manifest on its way to Node."""

    __slots__ = ("manifest",)
    # Any non-None value: jsii's ``_make_reference_for_native`` then returns the object unchanged
    # (no ``__jsii_name_mapping__``: not a struct; not an enum).
    __jsii_type__ = "dra_constructs.Document"

    def __init__(self, manifest: dict[str, Any]) -> None:
        self.manifest = manifest


class _Hook:
    installed: bool | None = None  # None: not tried yet


def _install_hook() -> bool:
    """Register the :class:`_Document` hook on the converter of jsii's node process (once)."""
    if _Hook.installed is None:
        try:
            # jsii's first walk must hand the document on as is (another jsii may refuse or wrap it)
            document = _Document({})
            if jsii._kernel._make_reference_for_native(jsii.kernel, document) is not document:
                raise TypeError("jsii's _make_reference_for_native does not pass a __jsii_type__ object through")
            converter = jsii.kernel.provider._process._serializer  # type: ignore[attr-defined]
            converter.register_unstructure_hook(_Document, _unstructure)
            _Hook.installed = converter.unstructure(document) == {}
        except Exception:  # another jsii: keep its ordinary path
            _Hook.installed = False
    return _Hook.installed


def _unstructure(document: _Document) -> dict[str, Any]:
    return document.manifest


def is_node_callback(depth: int = 2) -> bool:
    """Whether the function ``depth - 1`` frames up was called by jsii answering a Node callback."""
    return _CALLBACK_CODE is not None and sys._getframe(depth).f_code is _CALLBACK_CODE


def callback_answer(manifest: dict[str, Any]) -> Any:
    """What ``to_json`` returns to Node for ``manifest`` (checked plain JSON; read, never kept), or ``None``."""
    return _Document(manifest) if _install_hook() else None


_OVERRIDES: dict[type, list[Any]] = {}


def _library_class(klass: type) -> bool:
    """A class whose MRO down to the jsii class was all defined by this library."""
    for base in klass.__mro__:
        if vars(base).get("__jsii_declared_type__") is not None:  # the jsii class: overrides end here
            return True
        if not base.__module__.startswith(_LIBRARY):
            return False
    return False


def _cached_overrides(discover: Callable[[type, Any], list[Any]]) -> Callable[[type, Any], list[Any]]:
    def overrides(klass: type, obj: Any) -> list[Any]:
        kind = type(obj)
        cached = _OVERRIDES.get(kind) if klass is kind else None
        if cached is None:
            cached = discover(klass, obj)
            if klass is kind and _library_class(kind):
                _OVERRIDES[kind] = cached
        return list(cached)

    overrides.__wrapped__ = discover  # type: ignore[attr-defined]
    return overrides


def install() -> None:
    """Keep override discovery per library class (once per process; nothing when jsii has no such step)."""
    discover = getattr(jsii._kernel, "_get_overides", None)
    if callable(discover) and not hasattr(discover, "__wrapped__") and _takes_class_and_object(discover):
        jsii._kernel._get_overides = _cached_overrides(discover)  # type: ignore[assignment]


def _takes_class_and_object(discover: Callable[..., Any]) -> bool:
    """jsii's ``_get_overides(klass, obj)`` as this module wraps it (another signature: left alone)."""
    try:
        return list(inspect.signature(discover).parameters) == ["klass", "obj"]
    except (TypeError, ValueError):
        return False
