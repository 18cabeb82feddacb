"""Audit at cluster scale (issue 25): set findings once, readable text, no 32 MiB total, JSON item lines, progress."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from dra_constructs import _safe_load
from dra_constructs.cli import main
from dra_constructs.guardrails import audit, load_paths
from dra_constructs.guardrails import loader as loader_module

from .helpers import gpu_pod_spec, pod


def _tenant_pods(count: int, namespaces: int = 3) -> list[dict[str, Any]]:
    return [pod(gpu_pod_spec(), name=f"p{i}", namespace=f"team-{i % namespaces}") for i in range(count)]


def _kubectl_list(items: list[dict[str, Any]]) -> str:
    """What ``kubectl get -A -o json`` prints: a List, 4-space indentation."""
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}},
                      indent=4) + "\n"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# --- cluster-level findings once -----------------------------------------------------------------

def test_dra009_is_one_finding_with_count_and_sample() -> None:
    result = audit(_tenant_pods(30))
    dra009 = [f for f in result.findings if f.rule == "DRA009"]
    assert len(dra009) == 1
    finding = dra009[0]
    assert finding.count == 30
    assert len(finding.sample) == 10 and finding.sample[0] == finding.object
    assert finding.to_dict()["count"] == 30 and finding.to_dict()["sample"] == list(finding.sample)
    assert "3 tenant namespaces (team-0, team-1, team-2)" in finding.message


def test_dra009_suppressed_objects_leave_the_count() -> None:
    pods = _tenant_pods(6)
    pods[0]["metadata"]["annotations"] = {
        "guardrails.dra-constructs.io/suppressions": '[{"rule": "DRA009", "reason": "the barrier runs elsewhere"}]'}
    result = audit(pods)
    dra009 = [f for f in result.findings if f.rule == "DRA009"]
    assert len(dra009) == 1 and dra009[0].count == 5
    assert [s.finding.name for s in result.suppressed if s.finding.rule == "DRA009"] == ["p0"]


def test_dra009_tenant_scope_file_gives_one_finding_per_file(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / f"{name}.json").write_text(_kubectl_list(_tenant_pods(4, 2)))
    result = audit(load_paths([str(tmp_path)]), tenant_scope="file")
    dra009 = [f for f in result.findings if f.rule == "DRA009"]
    assert sorted((f.file, f.count) for f in dra009) == [(str(tmp_path / "a.json"), 4), (str(tmp_path / "b.json"), 4)]


def test_text_output_summary_per_rule_first_and_max_findings(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pods.json"
    pods = _tenant_pods(12)
    for p in pods:  # DRA001: a device-plugin GPU limit in every pod
        p["spec"]["containers"][0].setdefault("resources", {})["limits"] = {"nvidia.com/gpu": 1}
    path.write_text(_kubectl_list(pods))
    code, full, _ = _run(["audit", "--quiet", str(path)], capsys)
    assert code == 1
    lines = full.splitlines()
    assert lines[0].startswith("target: Kubernetes ")  # which release was judged, then the per-rule summary
    assert lines[1].startswith("DRA001 error: 12 findings (12 objects)")
    assert any(line.startswith("DRA009 error: 1 finding (12 objects)") for line in lines[:6])
    assert "    objects: 12: Pod/team-0/p0, " in full and " and 2 more" in full
    code, short, _ = _run(["audit", "--quiet", "--max-findings", "3", str(path)], capsys)
    assert code == 1
    total = sum(1 for line in full.splitlines() if "    fix: " in line)
    assert sum(1 for line in short.splitlines() if "    fix: " in line) == 3
    assert f"... {total - 3} more findings not shown (--max-findings 3" in short
    assert short.splitlines()[-1] == full.splitlines()[-1]  # the totals line


# --- input: no 32 MiB total, JSON through the fast parser with item lines --------------------------

def _big_configmap_list(megabytes: int) -> str:
    data = {"blob": "x" * (megabytes * 1024 * 1024)}
    return _kubectl_list([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": "a"},
                           "data": data}, *_tenant_pods(2, 1)])


def test_more_than_32_mib_in_all_is_audited_and_the_total_is_a_flag(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "export.json"
    path.write_text(_big_configmap_list(40))
    code, out, err = _run(["audit", "--quiet", str(path)], capsys)
    assert code == 0 and "3 objects scanned" in out, err
    code, out, err = _run(["audit", "--quiet", "--max-input-bytes", "1MiB", str(path)], capsys)
    assert code == 2 and "input too large: the limit is 1 MiB per run" in err and "--max-input-bytes" in err
    with pytest.raises(SystemExit) as usage:
        main(["audit", "--max-input-bytes", "lots", str(path)])
    assert usage.value.code == 2 and "--max-input-bytes" in capsys.readouterr().err


def test_json_list_item_lines_come_from_the_line_index_not_the_composer(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    text = _kubectl_list(_tenant_pods(5))
    path = tmp_path / "pods.json"
    path.write_text(text)

    def composer(*_: Any) -> None:
        raise AssertionError("the whole JSON document was composed")

    monkeypatch.setattr(loader_module, "_compose_json", composer)
    manifests = load_paths([str(path)])
    lines = text.split("\n")
    assert [m.name for m in manifests] == [f"p{i}" for i in range(5)]
    for m in manifests:
        assert lines[m.line - 1] == "        {" and f'                "name": "{m.name}",' in lines[m.line:m.line + 8]


def test_json_item_lines_other_layouts_fall_back_to_the_composer() -> None:
    compact = json.dumps({"apiVersion": "v1", "kind": "List", "items": _tenant_pods(3)})
    assert loader_module.json_item_lines(compact, 3) is None
    manifests = loader_module.load_text(compact, "c.json", is_json=True)
    assert [m.line for m in manifests] == [1, 1, 1]
    two = json.dumps({"apiVersion": "v1", "kind": "List", "items": _tenant_pods(2)}, indent=2)
    starts = [n for n, line in enumerate(two.split("\n"), 1) if line == "    {"]
    assert len(starts) == 2 and [m.line for m in loader_module.load_text(two, "t.json", is_json=True)] == starts


def test_json_through_orjson_keeps_the_limits() -> None:
    assert _safe_load._orjson is not None
    assert _safe_load._fast_json(_kubectl_list(_tenant_pods(2))) is not _safe_load._UNSET
    for text, problem in (('{"a": 1, "a": 2}', "duplicate key"), ('{"a" : 1, "a" : 2}', "duplicate key"),
                          ('{"x": "\\\\", "x": 1}', "duplicate key"), ('{"a": NaN}', "NaN"),
                          ("[" * 300 + "]" * 300, "nested deeper")):
        with pytest.raises(Exception, match=problem):
            _safe_load.json_document(text, "f.json")
    assert _safe_load.json_document('{"n": 123456789012345678901234567890}', "f") == {
        "n": 123456789012345678901234567890}  # orjson would give a float
    assert _safe_load.json_document('{"s": "\\ud800"}', "f") == {"s": "\ufffd"}


def test_json_on_stdin_gets_item_lines(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    text = _kubectl_list(_tenant_pods(4))
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    code, out, _ = _run(["audit", "--quiet", "--format", "json", "-"], capsys)
    finding = next(f for f in json.loads(out)["findings"] if f["rule"] == "DRA009")
    lines = text.split("\n")
    assert code == 1 and finding["file"] == "<stdin>"
    assert lines[finding["line"] - 1].strip().startswith('"namespace": "team-0"')


# --- progress on a terminal ----------------------------------------------------------------------

class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("tty, quiet, shown", [(True, False, True), (True, True, False), (False, False, False)])
def test_audit_progress_only_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tty: bool, quiet: bool,
                                           shown: bool) -> None:
    path = tmp_path / "pods.json"
    path.write_text(_kubectl_list(_tenant_pods(3)))
    stderr = _Terminal() if tty else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert main(["audit", *(["--quiet"] if quiet else []), str(path)]) == 1
    err = stderr.getvalue()
    if shown:
        assert "\rdra-constructs: reading" in err and "dra-constructs: checking rules" in err
        assert err.endswith("\r")  # the line is cleared before the report
    else:
        assert err == ""
