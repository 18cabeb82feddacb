"""The two-tenant example: valid for every target, clean under the guardrails thanks to the sanitizer."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import cdk8s
import kubernetes_validate
import pytest

from dra_constructs import set_kubernetes_version
from dra_constructs.guardrails import audit
from dra_constructs.target import Target

from .helpers import VERSIONS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
EXAMPLE: Any = importlib.import_module("two_tenants_with_sanitizer")


def synth_example(version: str) -> list[dict[str, Any]]:
    app = cdk8s.Testing.app()
    set_kubernetes_version(app, version)
    charts = EXAMPLE.build(app)
    assert [c.node.id for c in charts] == ["team-a", "team-b", "gpu-sanitizer"]
    return [dict(d) for chart in charts for d in cdk8s.Testing.synth(chart)]


@pytest.mark.parametrize("version", VERSIONS)
def test_example_is_valid_and_passes_the_guardrails(version: str) -> None:
    docs = synth_example(version)
    for doc in docs:
        kubernetes_validate.validate(doc, Target.parse(version).schema_version, strict=True)
    namespaces = {d["metadata"].get("namespace") for d in docs if d["kind"] in ("Deployment", "Job")}
    assert namespaces == {"team-a", "team-b"}
    result = audit(docs, kubernetes_version=version)
    assert [str(f) for f in result.findings] == []
    # Only the agent's own NVIDIA_VISIBLE_DEVICES=all, with the construct's written reason.
    assert [(s.finding.rule, s.finding.kind) for s in result.suppressed] == [("DRA002", "DaemonSet")]


def test_without_the_sanitizer_the_guardrails_object() -> None:
    docs = [d for d in synth_example("1.34") if d["kind"] != "DaemonSet"]
    assert "DRA009" in {f.rule for f in audit(docs, kubernetes_version="1.34").findings}
