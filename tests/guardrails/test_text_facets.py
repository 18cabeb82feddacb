"""Facets proven from an item's JSON text (``facets.note_facets_from_text``) equal the computed ones.

The reader of a ``kubectl -o json`` List notes the facets of a ConfigMap, a Service or a custom
object from the text it parsed, where that text has no backslash, no key the facets read and (a
ConfigMap) no ``sharing``. Here the proof is checked against :func:`facets` and the search it
skips, on the facet test pool (every fixture as every kind and group, with suppressions, sharing
configs, specs moved into data) written in several JSON layouts, and on generated objects; and the
audit of a streamed export is compared with the audit of its objects given in memory.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_constructs._io import ReadBudget
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails import audit
from dra_constructs.guardrails.facets import facets, note_facets_from_text
from dra_constructs.guardrails.loader import _objects
from dra_constructs.guardrails.manifest import POD_SPEC_KINDS, Manifest
from dra_constructs.guardrails.stream import Collector, stream_paths
from dra_constructs.guardrails.suppressions import SUPPRESSIONS_ANNOTATION

from .test_rule_facets import _KEYS, _LABELS, _VALUES, _pool

#: JSON layouts: kubectl's (indent 4), compact, spaces before colons, and non-ASCII escaped.
_LAYOUTS: list[dict[str, Any]] = [{"indent": 4, "ensure_ascii": False}, {"separators": (",", ":")},
                                  {"separators": (" , ", " : "), "ensure_ascii": False}, {"ensure_ascii": True}]


def _computed(obj: dict[str, Any]) -> tuple[int, bool, bool]:
    """Facets, pods and loose finds of a fresh object (nothing noted)."""
    m = Manifest(copy.deepcopy(obj))
    return facets(m), bool(m.pods), bool(m.loose_containers() or m.loose_resources())


def _noted(obj: dict[str, Any], text: bytes) -> Manifest:
    m = Manifest(obj)
    note_facets_from_text(m, text)
    return m


def _agrees(obj: dict[str, Any], text: bytes) -> bool:
    """Asserts a noted proof agrees with the computation; whether one was noted."""
    m = _noted(obj, text)
    if m.known_facets is None:
        return False
    assert (m.known_facets, bool(m.pods), bool(m.loose_containers() or m.loose_resources())) == _computed(obj), \
        text[:400]
    return True


@pytest.mark.parametrize("layout", range(len(_LAYOUTS)))
def test_the_pool_in_every_layout(layout: int) -> None:
    noted = 0
    for obj in _pool():
        noted += _agrees(obj, json.dumps(obj, **_LAYOUTS[layout]).encode())
    assert noted > 50  # the proof is used, not only refused


def test_what_keeps_the_proof_from_being_noted() -> None:
    plain = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n"},
             "data": {"LOG_LEVEL": "info"}}
    assert _noted(plain, json.dumps(plain).encode()).known_facets == 0
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": {}}
    assert _noted(claim, json.dumps(claim).encode()).known_facets == facets(Manifest(claim)) != 0
    # a key spelled with an escape, a suppression, a sharing config, a key the search finds by, a pod kind
    escaped = {**plain, "spec": {"worker": {"image": "x"}}}
    annotated = {**plain, "metadata": {"name": "a", "annotations": {SUPPRESSIONS_ANNOTATION: "[]"}}}
    sharing = {**plain, "data": {"config.yaml": "sharing: {mps: {}}"}}  # (no newline: no escape)
    found = {**plain, "kind": "Widget", "spec": {"limits": {"nvidia.com/gpu": 1}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}
    for obj, text in [(escaped, json.dumps(escaped).replace('"image"', '"im\\u0061ge"').encode()),
                      (annotated, json.dumps(annotated).encode()), (sharing, json.dumps(sharing).encode()),
                      (found, json.dumps(found).encode()), (pod, json.dumps(pod).encode())]:
        assert json.loads(text) == obj
        assert _noted(obj, text).known_facets is None, text
    assert {"Pod", "Deployment", "CronJob"} <= POD_SPEC_KINDS


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_LABELS), st.dictionaries(_KEYS, _VALUES, max_size=5),
       st.dictionaries(_KEYS, _VALUES, max_size=3), st.sampled_from(range(len(_LAYOUTS))))
def test_generated_objects(label: tuple[str, str], body: dict[str, Any], metadata: dict[str, Any],
                           layout: int) -> None:
    if label[1] in POD_SPEC_KINDS:
        label = ("v1", "ConfigMap")
    obj = {**body, "apiVersion": label[0], "kind": label[1], "metadata": {"name": "g", "namespace": "n", **metadata}}
    _agrees(obj, json.dumps(obj, **_LAYOUTS[layout]).encode())


def _loads(obj: dict[str, Any]) -> bool:
    """Whether the reader takes ``obj`` (the pool holds objects the API server would reject)."""
    try:
        list(_objects(copy.deepcopy(obj), "x.json", 1, None, seen={}))
    except DraConstructsError:
        return False
    return True


def test_a_streamed_export_audits_as_its_objects_do(tmp_path: Path) -> None:
    objects = [obj for obj in _pool() if _loads(obj)]
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=4))
    collector = Collector()
    stream_paths([str(path)], collector, None, budget=ReadBudget.of(None))
    assert sum(m.known_facets is not None for m in collector.manifests) > 50
    streamed = audit(collector.manifests, kubernetes_version="1.34").to_dict()
    given = audit([Manifest(copy.deepcopy(m.obj), file=m.file, line=m.line) for m in collector.manifests],
                  kubernetes_version="1.34", memoize=False).to_dict()
    assert streamed == given
