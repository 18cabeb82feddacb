"""``dra-sanitizer evidence``: the table, the HTML report, and bad evidence files (exit 2, the line)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dra_constructs.agent.cli import main
from dra_constructs.agent.evidence import EvidenceRecord, EvidenceWriter
from dra_constructs.agent.evidence_html import render_html
from dra_constructs.agent.evidence_read import read_evidence

HOSTILE_CLAIM = 'team-x/<script>document.title="pwned"</script>'
HOSTILE_REASON = 'verify found 3 non-zero words in "<img src=x onerror=alert(1)>" \x1b[2J\x1b[31mOK'


def _record(device: str, uuid: str, start: float, result: str = "released", **fields: object) -> EvidenceRecord:
    proven = result == "released"
    base: dict[str, object] = dict(
        node="node-a", device=device, uuid=uuid, cycle=1, trigger="deallocated", started_at=start, result=result,
        bytes_total=80 << 30, bytes_verified=(79 << 30) if proven else 0, coverage=0.9875 if proven else 0.0,
        fill_bytes_per_s=2.9e12 if proven else None, verify_bytes_per_s=3.1e12 if proven else None,
        phase_seconds={"drain": 1.5, "fill": 0.03, "verify": 0.03} if proven else {"drain": 60.0})
    base.update(fields)
    return EvidenceRecord.model_validate(base)


def write_evidence(path: Path) -> Path:
    """Four records of two devices, written by the agent's own writer, out of start order."""
    writer = EvidenceWriter(path, fsync=False)
    writer.write(_record("gpu-1", "GPU-bbbb", 1_767_225_700.0))
    writer.write(_record("gpu-0", "GPU-aaaa", 1_767_225_600.0, claim="team-a/train-1"))
    writer.write(_record("gpu-0", "GPU-aaaa", 1_767_225_900.0, "quarantined", claim=HOSTILE_CLAIM,
                         reason=HOSTILE_REASON))
    writer.write(_record("gpu-0", "GPU-aaaa", 1_767_226_000.0, kind="operator-release", trigger="operator",
                         result="operator-release", reason="memory test passed", operator="bob"))
    return path


def test_the_table_is_the_history_in_start_order_with_bandwidth_and_coverage(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_evidence(tmp_path / "evidence.jsonl")
    assert main(["evidence", "--file", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["TIME", "DEVICE", "UUID", "TRIGGER", "RESULT", "COVERAGE", "BYTES", "FILL", "VERIFY",
                                "SECONDS", "NODES", "HELD", "REASON"]
    assert [line.split()[1] for line in lines[1:5]] == ["gpu-0", "gpu-1", "gpu-0", "gpu-0"]  # by start time
    first = lines[1].split()
    assert first[0] == "2026-01-01T00:00:00Z" and first[4:10] == [
        "released", "98.75%", "79.0", "GiB/80.0", "GiB", "2900.0"]
    assert "3100.0 GB/s" in lines[1] and "1.56" in lines[1]  # verify bandwidth, seconds (sum of phases)
    assert lines[-1] == f"4 record(s) from {path} (4 line(s))"
    assert main(["evidence", "--file", str(path), "--device", "GPU-bbbb"]) == 0  # by UUID
    assert [line.split()[1] for line in capsys.readouterr().out.splitlines()[1:-1]] == ["gpu-1"]
    assert main(["evidence", "--file", str(path), "--device", "gpu-0", "--last", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[4] == "operator-release"


def test_tenant_strings_cannot_drive_the_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_evidence(tmp_path / "evidence.jsonl")
    assert main(["evidence", "--file", str(path), "--device", "gpu-0"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b[2J\\x1b[31mOK" in out


def test_the_html_escapes_every_tenant_string(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_evidence(tmp_path / "evidence.jsonl")
    report = tmp_path / "report.html"
    assert main(["evidence", "--file", str(path), "--html", str(report)]) == 0
    page = report.read_text()
    assert "<script" not in page and "<img" not in page and "\x1b" not in page
    assert "&lt;script&gt;document.title=&quot;pwned&quot;&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "default-src 'none'" in page  # and nothing could load or run if an escape were missed
    assert not re.search(r"(src|href)=\"(https?:)?//", page) and "<link" not in page
    assert page.count('<section class="device"') == 2 and page.count("<circle") == 4
    assert render_html(read_evidence(path), "t") == render_html(read_evidence(path), "t")  # no clock in it
    assert main(["evidence", "--file", str(path), "--html", str(report)]) == 0
    assert "TIME" in capsys.readouterr().out  # the table too
    assert main(["evidence", "--file", str(path), "--html", "-"]) == 0  # kubectl exec ... --html - > r.html
    assert capsys.readouterr().out == page


def test_device_nodes_held_are_in_the_table_and_the_report(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Review finding 8: holders found through /proc/*/fd (not in NVML's lists) are shown, escaped."""
    path = tmp_path / "evidence.jsonl"
    holder = {"pid": 4242, "owner_kind": "pod", "owner": "pod team-b/debug-0 (uid u2)", "nvml_listed": False,
              "device_nodes": ["/dev/nvidia0", "/run/<b>gpu</b>"], "comm": "sleep", "mps": None}
    listed = {"pid": 77, "owner_kind": "host", "owner": "host (/system.slice)", "nvml_listed": True,
              "device_nodes": [], "comm": None, "mps": None}
    EvidenceWriter(path, fsync=False).write(_record("gpu-0", "GPU-aaaa", 1_767_225_600.0, "quarantined",
                                                    reason="foreign contexts", foreign_processes=[holder, listed]))
    assert main(["evidence", "--file", str(path), "--html", str(tmp_path / "r.html")]) == 0
    row = capsys.readouterr().out.splitlines()[1]
    assert "pid 4242 (pod team-b/debug-0 (uid u2)): /dev/nvidia0, /run/<b>gpu</b>" in row and "pid 77" not in row
    page = (tmp_path / "r.html").read_text()
    assert "<th>Device nodes held</th>" in page and "<b>" not in page
    assert "pid 4242 (pod team-b/debug-0 (uid u2)): /dev/nvidia0, /run/&lt;b&gt;gpu&lt;/b&gt;" in page


@pytest.mark.parametrize(("bad", "problem"), [
    (b'{"oops"\n', "not JSON"),
    (b"[1, 2]\n", "not an evidence record: record: Input should be"),
    (b'{"node": "n"}\n', "not an evidence record: device: Field required"),
    (b"\xff\xfe\n", "not JSON"),
])
def test_a_bad_line_is_exit_2_naming_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              bad: bytes, problem: str) -> None:
    path = write_evidence(tmp_path / "evidence.jsonl")
    good = path.read_bytes().splitlines(keepends=True)[0]
    path.write_bytes(good + bad + good)
    assert main(["evidence", "--file", str(path)]) == 2
    err = capsys.readouterr().err
    assert "evidence.jsonl:2: line=" in err and problem in err and "Fix:" in err and "Traceback" not in err


def test_bad_input_never_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evidence", "--file", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err
    assert main(["evidence", "--file", str(tmp_path)]) == 2
    assert "not a regular file" in capsys.readouterr().err
    path = write_evidence(tmp_path / "evidence.jsonl")
    assert main(["evidence", "--file", str(path), "--device", "gpu-7"]) == 2
    assert "no record names this device" in capsys.readouterr().err
    assert main(["evidence", "--file", str(path), "--last", "0"]) == 2
    assert main(["evidence", "--file", str(path), "--html", str(tmp_path / "no" / "dir.html")]) == 2
    assert "cannot write the report" in capsys.readouterr().err
    record = json.loads(path.read_text().splitlines()[0]) | {"result": "maybe"}
    path.write_text(json.dumps(record) + "\n")
    assert main(["evidence", "--file", str(path)]) == 2
    assert "result: Input should be" in capsys.readouterr().err


def test_skip_bad_lines_lists_them_in_the_table_and_the_report(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = write_evidence(tmp_path / "evidence.jsonl")
    with path.open("a") as handle:
        handle.write('{"node": "node-a", "dev')  # torn by a crash mid-append
    assert main(["evidence", "--file", str(path), "--skip-bad-lines", "--html", str(tmp_path / "r.html")]) == 0
    out = capsys.readouterr().out
    assert "4 record(s)" in out and "skipped line 5: not JSON" in out
    assert "line 5: not JSON" in (tmp_path / "r.html").read_text()


def test_the_default_file_is_the_configs_evidence_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(f"node_name: node-a\nbackend: simulated\nstate_dir: {tmp_path}/state\n"
                      f"evidence_file: {tmp_path}/evidence.jsonl\nsimulated: {{gpus: 1, mig_slices_per_gpu: 2}}\n"
                      "kube: {mode: disabled, kubernetes_version: '1.34'}\n")
    assert main(["once", "--config", str(config), "--device", "gpu-0-mig-1g10gb-19-0"]) == 0
    capsys.readouterr()
    assert main(["evidence", "--config", str(config)]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[1:5] == ["gpu-0-mig-1g10gb-19-0", "MIG-sim-0000-0", "once", "released"] and row[5].endswith("%")
