"""Construct-layer helpers: the app-wide target version and lazy construct paths."""

from __future__ import annotations

import weakref
from collections.abc import Callable

import constructs

from .target import Target

__all__ = ["KUBERNETES_VERSION_CONTEXT", "guard", "lazy_path", "resolve_target", "set_kubernetes_version"]

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
