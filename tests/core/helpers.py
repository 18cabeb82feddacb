"""Helpers for construct tests: fresh charts, synthesis to dicts, schema validation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import cdk8s
import kubernetes_validate
from jsii._kernel.providers import process

from dra_constructs import Target, set_kubernetes_version


def new_chart(kubernetes_version: str = "1.32", chart_id: str = "test") -> cdk8s.Chart:
    """A chart in a fresh App whose target is ``kubernetes_version``."""
    app = cdk8s.Testing.app()
    set_kubernetes_version(app, kubernetes_version)
    return cdk8s.Chart(app, chart_id)


def synth(chart: cdk8s.Chart) -> list[dict[str, Any]]:
    """The chart's manifests as plain dicts."""
    return [dict(doc) for doc in cdk8s.Testing.synth(chart)]


def validate_schema(doc: dict[str, Any], kubernetes_version: str) -> None:
    """Strict validation against the official JSON schema of the target (kubernetes-validate)."""
    kubernetes_validate.validate(doc, Target.parse(kubernetes_version).schema_version, strict=True)


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The documents of one kind."""
    return [d for d in docs if d["kind"] == kind]


def validate_any_schema(doc: dict[str, Any], kubernetes_version: str) -> None:
    """Kubernetes kinds against the target's schema; Kueue kinds against Kueue's CRD schema."""
    if str(doc.get("apiVersion", "")).startswith("kueue.x-k8s.io/"):
        from .kueue_schema import validate_kueue

        validate_kueue(doc)
    else:
        validate_schema(doc, kubernetes_version)


def validate_schemas(docs: list[dict[str, Any]], kubernetes_version: str) -> None:
    """:func:`validate_any_schema` for every document, the Kubernetes kinds first: the Kueue kinds need
    ``../shared/schemas/kueue`` and skip the test where it is absent (tests/shared_data.py)."""
    kueue = [d for d in docs if str(d.get("apiVersion", "")).startswith("kueue.x-k8s.io/")]
    for doc in [d for d in docs if d not in kueue] + kueue:
        validate_any_schema(doc, kubernetes_version)


@contextmanager
def jsii_exchanges(label: Callable[[Any], str | None]) -> Iterator[list[str]]:
    """``label(request)`` of each request Python sends to jsii's Node kernel while the block runs
    (requests it labels None are not kept)."""
    kept: list[str] = []
    original = process._NodeProcess.send

    def send(self: Any, request: Any, response_type: Any) -> Any:
        text = label(request)
        if text is not None:
            kept.append(text)
        return original(self, request, response_type)

    process._NodeProcess.send = send  # type: ignore[method-assign]
    try:
        yield kept
    finally:
        process._NodeProcess.send = original  # type: ignore[method-assign]
