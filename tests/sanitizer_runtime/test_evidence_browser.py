"""The HTML evidence report in a real headless browser (Debian's ``chromium``): it parses into the
timeline and tables we wrote, and no tenant string becomes markup or runs.

Skips when no chromium is installed (``apt-get install chromium``), except under CI, where it
fails: a CI job without the browser must not pass by skipping.
"""

from __future__ import annotations

import html
import shutil
import subprocess
from pathlib import Path

import pytest
from shared_data import in_ci

from dra_constructs.agent.cli import main

from .test_evidence_report import HOSTILE_CLAIM, write_evidence

_BROWSERS = ("chromium", "chromium-browser")


def _chromium() -> str:
    for name in _BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    if in_ci():
        pytest.fail("no chromium on PATH under CI: install Debian's chromium (apt-get install -y chromium)")
    pytest.skip("no chromium on PATH (apt-get install -y chromium) to render the HTML report")


def _dump_dom(browser: str, page: Path, profile: Path) -> str:
    out = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={profile}",
         "--virtual-time-budget=2000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=180, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_the_report_renders_in_chromium_and_no_tenant_string_runs(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    browser = _chromium()
    control = tmp_path / "control.html"  # positive control: this browser runs a page's script
    control.write_text("<!DOCTYPE html><html><body><script>document.body.setAttribute('data-ran', 'yes')"
                       "</script></body></html>")
    assert 'data-ran="yes"' in _dump_dom(browser, control, tmp_path / "profile")
    report = tmp_path / "report.html"
    assert main(["evidence", "--file", str(write_evidence(tmp_path / "evidence.jsonl")), "--html", str(report)]) == 0
    capsys.readouterr()
    dom = _dump_dom(browser, report, tmp_path / "profile")
    assert "<script" not in dom and "<img" not in dom and "pwned" not in dom.split("</title>")[0]
    assert html.escape(HOSTILE_CLAIM, quote=False) in dom  # shown as text, in the quarantined row
    assert dom.count('<section class="device"') == 2 and dom.count("<circle") == 4
    assert dom.count('class="r bad"') >= 2  # the quarantine: its row and the device's last result
    assert '<table id="summary">' in dom
