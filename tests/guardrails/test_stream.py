"""Streamed audit (issue 25): the same result as loading every object whole, in a compact set.

``dra-constructs audit`` reads its inputs object by object into a :class:`Collector` that keeps
later objects of a known shape as slim copies over the first one's fields, and locates findings
from the objects' byte spans. These tests compare it with the whole path (``load_paths``, every
object kept, locating from the files' texts) on the fixtures, the real-world corpus and a
``kubectl get -o json`` style export of them with clones that differ in identity fields.
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from shared_data import shared_path

from dra_constructs._io import ReadBudget
from dra_constructs.cli import main
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails import audit, load_paths
from dra_constructs.guardrails.cli import _spans
from dra_constructs.guardrails.locate import with_field_lines
from dra_constructs.guardrails.shape_key import MEMOIZED_KINDS
from dra_constructs.guardrails.skipped import SkippedInput
from dra_constructs.guardrails.stream import Collector, stream_paths

from .helpers import FIXTURES


def _whole(paths: list[str], scope: str, stdin: str | None = None) -> tuple[dict[str, Any], list[str], list[str]]:
    texts: dict[str, str] = {}
    skipped: list[SkippedInput] = []
    errors: list[DraConstructsError] = []
    manifests = load_paths(paths, io.StringIO(stdin) if stdin is not None else None, texts=texts, skipped=skipped,
                           errors=errors, max_bytes=None)
    result = with_field_lines(audit(manifests, kubernetes_version="1.34", tenant_scope=scope), texts)
    return result.to_dict(), [str(s) for s in skipped], [str(e) for e in errors]


def _streamed(paths: list[str], scope: str, tmp: Path, stdin: str | None = None,
              ) -> tuple[dict[str, Any], list[str], list[str]]:
    skipped: list[SkippedInput] = []
    errors: list[DraConstructsError] = []
    sources: dict[str, str] = {}
    collector = Collector()
    stream_paths(paths, collector, io.StringIO(stdin) if stdin is not None else None, skipped=skipped,
                 errors=errors, budget=ReadBudget.of(None), sources=sources, spool_dir=str(tmp))
    result = audit(collector.manifests, kubernetes_version="1.34", tenant_scope=scope)
    result = with_field_lines(result, spans=_spans(collector.manifests, result), sources=sources)
    return result.to_dict(), [str(s) for s in skipped], [str(e) for e in errors]


def _clone(obj: dict[str, Any], n: int) -> dict[str, Any]:
    """``obj`` as another object of its controller: new name, uid, node, status, history."""
    out = copy.deepcopy(obj)
    metadata = out.setdefault("metadata", {})
    if isinstance(metadata, dict):
        metadata["name"] = f"{metadata.get('name', 'x')}-{n}"
        metadata["uid"] = f"00000000-0000-0000-0000-{n:012d}"
        metadata["resourceVersion"] = str(1000 + n)
        metadata["managedFields"] = [{"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {}}}]
        labels = metadata.get("labels")
        if isinstance(labels, dict):
            labels["pod-template-hash"] = f"h{n}"
    if out.get("kind") == "Pod" and isinstance(out.get("spec"), dict):
        out["spec"]["nodeName"] = f"node-{n}"
    out["status"] = {"phase": "Running", "podIP": f"10.0.0.{n % 250}"}
    return out


def _export(objects: list[dict[str, Any]], clones: int) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for obj in objects:
        items.append(obj)
        if obj.get("kind") in MEMOIZED_KINDS:
            items += [_clone(obj, n) for n in range(clones)]
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def _corpus_objects(paths: list[str]) -> list[dict[str, Any]]:
    skipped: list[SkippedInput] = []
    errors: list[DraConstructsError] = []
    return [m.obj for m in load_paths(paths, skipped=skipped, errors=errors, max_bytes=None)]


@pytest.mark.parametrize("scope", ["file", "set"])
def test_fixtures_streamed_equal_whole(tmp_path: Path, scope: str) -> None:
    paths = [str(FIXTURES)]
    assert _streamed(paths, scope, tmp_path) == _whole(paths, scope)


@pytest.mark.parametrize("scope", ["file", "set"])
def test_realworld_corpus_and_its_export_streamed_equal_whole(tmp_path: Path, scope: str) -> None:
    corpus = shared_path("corpus/realworld")
    paths = [str(corpus), str(FIXTURES / "noncompliant")]
    assert _streamed(paths, scope, tmp_path) == _whole(paths, scope)
    export = tmp_path / "export.json"  # the same objects as kubectl prints a cluster, with clones
    export.write_text(json.dumps(_export(_corpus_objects(paths), clones=3), indent=4))
    streamed = _streamed([str(export)], scope, tmp_path)
    assert streamed == _whole([str(export)], scope)
    assert streamed[0]["findings"]  # (the comparison compares something)


def test_stdin_export_is_streamed_and_equal(tmp_path: Path) -> None:
    objects = _corpus_objects([str(FIXTURES / "noncompliant")])
    text = json.dumps(_export(objects, clones=2), indent=4)
    streamed = _streamed(["-"], "set", tmp_path, stdin=text)
    assert streamed == _whole(["-"], "set", stdin=text)
    assert any(f["file"] == "<stdin>" and f["line"] for f in streamed[0]["findings"])


def test_collector_keeps_one_whole_object_per_shape(tmp_path: Path) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "a"},
           "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    path = tmp_path / "pods.json"
    path.write_text(json.dumps(_export([pod], clones=50), indent=4))
    collector = Collector()
    stream_paths([str(path)], collector, budget=ReadBudget.of(None))
    first, *rest = collector.manifests
    assert len(rest) == 50 and all(m.span is not None for m in collector.manifests)
    assert all(m.obj["spec"] is first.obj["spec"] and "status" not in m.obj for m in rest)
    assert all("managedFields" not in m.obj["metadata"] for m in rest)
    assert [m.name for m in rest] == [f"p-{n}" for n in range(50)] and all(m.shape is first.shape for m in rest)


def test_bad_item_after_good_ones_is_reported_as_the_whole_read_reports_it(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "a"},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    export = _export([pod], clones=5)
    export["items"][4]["metadata"]["name"] = 5  # same shape as the others, a name that is not a string
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(export, indent=4))
    good = tmp_path / "good.yaml"
    good.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: ok}\nspec:\n  containers:\n"
                    "  - {name: c, image: i, resources: {limits: {nvidia.com/gpu: 1}}}\n")
    whole_errors = _whole([str(bad), str(good)], "set")[2]
    streamed = _streamed([str(bad), str(good)], "set", tmp_path)
    assert streamed[2] == whole_errors and "metadata.name" in whole_errors[0] and ":" in whole_errors[0]
    assert {f["object"] for f in streamed[0]["findings"]} == {"Pod/default/ok"}  # the bad file adds nothing
    code = main(["audit", "--quiet", str(bad), str(good)])
    assert code == 2 and "metadata.name" in capsys.readouterr().err


def test_max_total_bytes_is_the_total_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "a.json"
    path.write_text(json.dumps(_export(_corpus_objects([str(FIXTURES / "compliant")]), clones=1), indent=4))
    assert main(["audit", "--quiet", "--max-total-bytes", "1KiB", str(path)]) == 2
    assert "input too large: the limit is 1024 bytes per run" in capsys.readouterr().err
    assert main(["audit", "--quiet", "--max-total-bytes", "none", "--format", "json", str(path)]) in (0, 1)


@pytest.mark.parametrize("bad", ["name: 5", "generateName: [x]", "labels: {pod-template-hash: 7}"])
def test_type_check_once_per_shape_still_checks_the_identity_fields(tmp_path: Path, bad: str) -> None:
    """A later object of a shape that passed is checked in the fields its key leaves out: same error."""
    pod = ("apiVersion: v1\nkind: Pod\nmetadata: {{namespace: a, {meta}}}\nspec:\n"
           "  containers: [{{name: c, image: i}}]\n")
    path = tmp_path / "pods.yaml"
    path.write_text("---\n".join(pod.format(meta=f"name: p{n}") for n in range(3)) + "---\n" + pod.format(meta=bad))
    whole = _whole([str(path)], "set")[2]
    assert len(whole) == 1 and "metadata." in whole[0] and f"{path}:" in whole[0]
    assert _streamed([str(path)], "set", tmp_path)[2] == whole
