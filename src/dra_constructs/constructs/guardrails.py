"""Synth-time guardrails: one validation on the cdk8s App runs the rule pack over every chart.

Construct layer (imports cdk8s). The rules see every API object of the App, built by
dra-constructs, by hand (``ApiObject``) or with cdk8s-plus, because they read each chart's
synthesized JSON (one ``chart.to_json()`` per chart, no per-object jsii calls) and run the
pure-Python rules on it (the library's own unmodified objects hand over the dicts they were
built from instead: ``dra_constructs.constructs._rendered``). ``app.synth()``,
``app.synth_yaml()`` and ``cdk8s synth`` fail on an
error-level finding; warnings go to stderr.
"""

from __future__ import annotations

import functools
import sys
import weakref
from collections import defaultdict
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar, cast

import cdk8s
import constructs
import jsii

from dra_constructs.constructs._rendered import chart_manifests
from dra_constructs.constructs.scope import resolve_dra_extended_resources, resolve_target
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails.engine import AuditResult, audit
from dra_constructs.guardrails.manifest import Manifest
from dra_constructs.guardrails.model import Finding, Severity
from dra_constructs.guardrails.rules import RULES_BY_ID
from dra_constructs.guardrails.suppressions import (
    SUPPRESSIONS_ANNOTATION,
    Suppression,
    parse_suppressions,
    render_suppressions,
    require_valid,
)
from dra_constructs.target import Target

__all__ = ["GuardrailsError", "enable_guardrails", "ensure_guardrails", "suppress", "validate_app"]

_CHART_KEY = "chart"


def _charts(root: constructs.Construct) -> list[cdk8s.Chart]:
    if isinstance(root, cdk8s.App):
        return list(root.charts)
    return [cast(cdk8s.Chart, c) for c in root.node.find_all() if cdk8s.Chart.is_chart(c)]


def _collect(root: constructs.Construct) -> list[Manifest]:
    manifests: list[Manifest] = []
    for chart in _charts(root):
        for obj in chart_manifests(chart, root):  # the library's own dicts; Node renders the rest
            manifests.append(Manifest(obj, position=len(manifests), extra={_CHART_KEY: chart}))
    return manifests


def _run(root: constructs.Construct, version: str | Target | None) -> tuple[AuditResult, list[Manifest]]:
    target = resolve_target(root, version, f"{root.node.path or 'App'}: guardrails")
    manifests = _collect(root)
    declared = resolve_dra_extended_resources(root)
    return audit(manifests, kubernetes_version=target, dra_extended_resources=declared), manifests


def _construct_paths(manifests: list[Manifest], findings: list[Finding]) -> dict[str, str]:
    """``Kind/ns/name`` -> construct path, looked up only in charts that have findings."""
    wanted = {f.object for f in findings}
    charts = {id(m.extra[_CHART_KEY]): m.extra[_CHART_KEY] for m in manifests if m.object_id in wanted}
    by_kind_name: dict[tuple[str, str], list[str]] = defaultdict(list)
    for chart in charts.values():
        for child in chart.node.find_all():
            if isinstance(child, cdk8s.ApiObject):
                by_kind_name[(child.kind, child.name)].append(child.node.path)
    return {
        m.object_id: by_kind_name[(m.kind, m.name)][0]
        for m in manifests if m.object_id in wanted and by_kind_name.get((m.kind, m.name))
    }


#: DRA005 on a cdk8s-plus object: the claim fields were there and its 1.28 L1 filtered them.
_PLUS_DRA005 = ("cdk8s-plus-28 dropped the 1.31+ claim fields (resourceClaimTemplateName, resources.claims) "
                "from this object: its L1 filters everything the 1.28 schema does not know, JSON patches included")
_PLUS_DRA005_FIX = ("attach the claims with dra_constructs.attach_claims(workload, {'container': [template.use()]}) "
                    "instead of a JSON patch (docs/cdk8s-plus.md)")


def _message(finding: Finding, paths: dict[str, str], plus: frozenset[str] = frozenset()) -> str:
    where = paths.get(finding.object)
    at = f" (construct {where})" if where else ""
    message, fix = finding.message, finding.fix
    if finding.rule == "DRA005" and finding.object in plus:
        message, fix = f"{message}; {_PLUS_DRA005}", _PLUS_DRA005_FIX
    return f"[{finding.rule}] {finding.object}{at} {finding.path}: {message}. Fix: {fix}"


def _plus_objects(manifests: list[Manifest], findings: list[Finding]) -> frozenset[str]:
    """Objects with a DRA005 finding that a cdk8s-plus construct rendered (its L1 ``Resource`` child)."""
    wanted = {f.object for f in findings if f.rule == "DRA005"}
    if not wanted:
        return frozenset()
    charts = {id(m.extra[_CHART_KEY]): m.extra[_CHART_KEY] for m in manifests if m.object_id in wanted}
    plus: set[tuple[str, str]] = set()
    for chart in charts.values():
        for child in chart.node.find_all():
            parent = child.node.scope
            if isinstance(child, cdk8s.ApiObject) and parent is not None and \
                    str(getattr(type(parent), "__jsii_type__", "")).startswith("cdk8s-plus-"):
                plus.add((child.kind, child.name))
    return frozenset(m.object_id for m in manifests if m.object_id in wanted and (m.kind, m.name) in plus)


class GuardrailsError(DraConstructsError, RuntimeError):
    """Synth refused: error-level guardrail findings, one line each (``findings`` holds them).

    Raised by ``app.synth()``, ``app.synth_yaml()``, ``chart.to_json()`` and
    ``cdk8s.Testing.synth()`` instead of jsii's RuntimeError; still a ``RuntimeError`` for old callers.
    """

    def __init__(self, lines: list[str]) -> None:
        self.lines = list(lines)
        first = self.lines[0] if self.lines else ""
        self.path, self.field, self.value = "App", "guardrails", f"{len(self.lines)} error(s)"
        self.problem, self.fix = first, "see each finding's Fix"
        Exception.__init__(self, "\n".join(self.lines))

    def __str__(self) -> str:
        return "\n".join(self.lines)


# Messages of the guardrail validation that failed in the current synth call (see _translate).
_FAILED: list[str] = []

F = TypeVar("F", bound=Callable[..., Any])


def _translate(method: F) -> F:
    """Wrap a cdk8s synth entry point: a guardrail failure becomes :class:`GuardrailsError`.

    cdk8s runs validations inside the JS kernel and throws one JS error for all of them; jsii turns
    it into a RuntimeError with a JS stack. The validation records its messages first, so the
    wrapper can raise the library's error (from None: no JS stack) with one line per finding.
    """

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        del _FAILED[:]
        try:
            return method(*args, **kwargs)
        except RuntimeError as error:
            if isinstance(error, GuardrailsError) or not _FAILED:
                raise
            lines = list(dict.fromkeys(_FAILED))
            del _FAILED[:]
            raise GuardrailsError(lines) from None

    return cast(F, wrapper)


def _install_translation() -> None:
    if getattr(cdk8s.App.synth, "__dra_translated__", False):
        return
    for owner, name in ((cdk8s.App, "synth"), (cdk8s.App, "synth_yaml"), (cdk8s.Chart, "to_json")):
        wrapped = _translate(getattr(owner, name))
        setattr(wrapped, "__dra_translated__", True)  # noqa: B010 (a function attribute mypy cannot see)
        setattr(owner, name, wrapped)
    setattr(cdk8s.Testing, "synth", staticmethod(_translate(cdk8s.Testing.synth)))  # noqa: B010


_install_translation()


def _synth_call() -> FrameType | None:
    """The outermost jsii call (``app.synth()``, ``synth_yaml()``, ``chart.to_json()``) on the stack.

    Validations run as jsii callbacks inside the Python frame of the call that started the
    synth. That frame object identifies one synth: the cache holds a reference to it, so a later
    synth always has a different frame. Without a jsii frame (a direct call) nothing is reused.
    Hand-written because jsii exposes no synth-scoped hook to Python.
    """
    frame: FrameType | None = sys._getframe(1)
    outermost = None
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith("jsii._kernel"):
            outermost = frame
        frame = frame.f_back
    return outermost


@jsii.implements(constructs.IValidation)
class _GuardrailsValidation:
    """The one validation :func:`ensure_guardrails` attaches to the App root."""

    def __init__(self, root: constructs.Construct, version: str | Target | None) -> None:
        self._root = root
        self.version = version
        self._running = False
        self._cached: tuple[FrameType, list[str]] | None = None

    def validate(self) -> list[str]:
        # chart.to_json() re-runs the App's validations: answer the nested call with nothing.
        if self._running:
            return []
        # One synth calls the App's validations 1 + (number of charts) times (App.synth validates,
        # then every chart.toJson() validates again); the tree cannot change in between, so the
        # first answer is reused for the rest of that synth (see _synth_call).
        call = _synth_call()
        if call is not None and self._cached is not None and self._cached[0] is call:
            _FAILED.extend(self._cached[1])
            return self._cached[1]
        self._running = True
        try:
            result, manifests = _run(self._root, self.version)
        except DraConstructsError as error:  # e.g. DRA extended resources declared for a target < 1.34
            return [str(error)]
        except RuntimeError:
            # Another construct's validation failed inside chart.to_json(): cdk8s reports that
            # error for this synth; the guardrails run again once it is fixed.
            return []
        finally:
            self._running = False
        errors = [f for f in result.findings if f.severity is Severity.ERROR]
        warnings = [f for f in result.findings if f.severity is Severity.WARNING]
        paths = _construct_paths(manifests, errors + warnings) if result.findings else {}
        plus = _plus_objects(manifests, errors)
        for finding in warnings:
            print(f"dra-constructs guardrails: warning {_message(finding, paths, plus)}", file=sys.stderr)
        messages = [_message(f, paths, plus) for f in errors]
        self._cached = (call, messages) if call is not None else None
        _FAILED.extend(messages)
        return messages


def _root(scope: constructs.Construct) -> constructs.Construct:
    return cast(constructs.Construct, scope.node.root)


_VALIDATIONS: weakref.WeakKeyDictionary[constructs.Construct, _GuardrailsValidation] = weakref.WeakKeyDictionary()


def ensure_guardrails(scope: constructs.Construct, *, kubernetes_version: str | Target | None = None) -> None:
    """Attach the guardrail validation to ``scope``'s App (once; later calls reuse it).

    The target version is ``kubernetes_version`` if given, else the App's
    ``dra-constructs/kubernetes-version`` context (``set_kubernetes_version``), else 1.32.
    Two different explicit versions for one App are an error.
    """
    root = _root(scope)
    version = None if kubernetes_version is None else Target.parse(kubernetes_version, scope.node.path or "App")
    existing = _VALIDATIONS.get(root)
    if existing is None:
        validation = _GuardrailsValidation(root, version)
        root.node.add_validation(validation)
        _VALIDATIONS[root] = validation
        return
    if version is None:
        return
    if existing.version is not None and existing.version != version:
        raise DraConstructsError(
            scope.node.path or "App", "kubernetes_version", str(version),
            f"the App's guardrails already check against Kubernetes {existing.version}",
            "use one target version per App (set_kubernetes_version(app, ...) once)",
        )
    existing.version = version


def enable_guardrails(app: constructs.Construct, *, kubernetes_version: str | Target | None = None) -> None:
    """Turn the synth-time guardrails on for any App, also one of only hand-built or cdk8s-plus objects.

    dra-constructs' own constructs do this themselves; call it once in an App that has none of
    them. ``app.synth()`` then raises :class:`GuardrailsError` (a ``DraConstructsError``) on an
    error-level finding.
    """
    ensure_guardrails(app, kubernetes_version=kubernetes_version)


def validate_app(app: constructs.Construct, *, kubernetes_version: str | Target | None = None) -> list[Finding]:
    """Every open finding (errors and warnings) of the App, without synthesizing it."""
    root = _root(app)
    existing = _VALIDATIONS.get(root)
    version = kubernetes_version if kubernetes_version is not None else (existing.version if existing else None)
    if existing is not None:
        existing._running = True  # the chart.to_json() calls must not re-enter the validation
    try:
        result, _ = _run(root, version)
    finally:
        if existing is not None:
            existing._running = False
    return list(result.findings)


def _api_object(target: constructs.Construct) -> cdk8s.ApiObject:
    if isinstance(target, cdk8s.ApiObject):
        return target
    try:
        return cdk8s.ApiObject.of(target)
    except RuntimeError as error:
        raise DraConstructsError(target.node.path, "api_object", type(target).__name__,
                                 "not an ApiObject and has no single ApiObject child",
                                 "pass the ApiObject (or the construct that owns exactly one)") from error


def suppress(target: constructs.Construct, rule: str, *, reason: str) -> None:
    """Silence ``rule`` on one object, with a written ``reason`` (required, shown in the YAML).

    The suppression is stored in the object's ``guardrails.dra-constructs.io/suppressions``
    annotation, which the synth validation, ``dra-constructs audit`` and the admission policy
    all honour. ``target`` is an ``ApiObject`` or a construct owning one (cdk8s-plus, ours).
    """
    where = target.node.path or "App"
    checked = require_valid(rule, reason, RULES_BY_ID, where)
    api_object = _api_object(target)
    metadata: dict[str, Any] = api_object.metadata.to_json() or {}
    current = (metadata.get("annotations") or {}).get(SUPPRESSIONS_ANNOTATION)
    existing, _ = parse_suppressions(current, RULES_BY_ID) if current else ({}, [])
    merged = [Suppression(r, text) for r, text in existing.items()] + [checked]
    api_object.metadata.add_annotation(SUPPRESSIONS_ANNOTATION, render_suppressions(merged))

_GUARDED_SCOPES: weakref.WeakSet[constructs.Construct] = weakref.WeakSet()


def guard(scope: constructs.Construct) -> None:
    """Make sure the App of ``scope`` runs the guardrails at synth (once per scope, no jsii call after)."""
    if scope in _GUARDED_SCOPES:
        return
    ensure_guardrails(scope)
    _GUARDED_SCOPES.add(scope)
