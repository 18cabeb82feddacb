"""checkov over the synthesized manifests: zero failed checks, and every suppression is earned.

checkov (a dev dependency, installed in the venv next to pytest; ``pip check`` is clean) runs
offline: ``--skip-download`` and ``BC_SKIP_MAPPING`` keep it from calling its platform. One
run scans several variants (one file each); the whole test takes a few seconds.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dra_constructs.agent.config import AgentConfig
from dra_constructs.constructs.sanitizer._agent_spec import agent_capabilities
from dra_constructs.constructs.sanitizer._checkov import justification, suppressed_checks

from .helpers import build

# One checkov scan for the file: the group keeps its tests on one xdist worker, where the module fixture
# `scan` is built once (spread over two workers, each built its own: 14 s each in CI).
pytestmark = pytest.mark.xdist_group("checkov")

CHECKOV = Path(sys.executable).parent / "checkov"


def _without_suppressions(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = copy.deepcopy(docs)
    for doc in out:
        annotations = doc["metadata"].get("annotations") or {}
        for key in [k for k in annotations if k.startswith("checkov.io/skip")]:
            del annotations[key]
    return out


@pytest.fixture(scope="module")
def scan(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """file stem -> {"failed": [...], "skipped": [...]} for every variant, from one checkov run."""
    folder = tmp_path_factory.mktemp("checkov")
    _, default = build("1.34")  # MIG (the default shape): privileged
    _, whole = build("1.34", mig_mode="off")  # whole GPUs: KILL + SYS_ADMIN only
    _, amd = build("1.34", vendor="amd")  # AMD: privileged (device nodes, sysfs)
    variants = {
        "default": default,
        "whole-gpus": whole,
        "target-1-32": build("1.32")[1],
        "unpinned": build("1.34", mig_mode="off", image_digest=None, unpinned_image_reason="test")[1],
        "unsuppressed": _without_suppressions(default),
        "whole-gpus-unsuppressed": _without_suppressions(whole),
        "amd": amd,
        "amd-unsuppressed": _without_suppressions(amd),
    }
    for stem, docs in variants.items():
        (folder / f"{stem}.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"}
    result = subprocess.run(
        [str(CHECKOV), "--directory", str(folder), "--framework", "kubernetes", "--skip-download",
         "--output", "json"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )
    assert result.returncode in (0, 1), result.stderr[-2000:]  # 1: some variant fails, by design
    report = json.loads(result.stdout)
    assert report["summary"]["parsing_errors"] == 0
    by_file: dict[str, dict[str, list[dict[str, Any]]]] = {s: {"failed": [], "skipped": []} for s in variants}
    for kind in ("failed", "skipped"):
        for check in report["results"][f"{kind}_checks"]:
            by_file[Path(check["file_path"]).stem][kind].append(check)
    return by_file


def _ids(checks: list[dict[str, Any]]) -> list[str]:
    return sorted(c["check_id"] for c in checks)


def test_no_failed_checks(scan: dict[str, dict[str, list[dict[str, Any]]]]) -> None:
    assert _ids(scan["default"]["failed"]) == []
    assert _ids(scan["whole-gpus"]["failed"]) == []
    assert _ids(scan["target-1-32"]["failed"]) == []
    assert _ids(scan["amd"]["failed"]) == []


def test_the_amd_suppressions_are_real_findings_with_their_own_reasons(
        scan: dict[str, dict[str, list[dict[str, Any]]]]) -> None:
    skipped = scan["amd"]["skipped"]
    assert _ids(skipped) == _ids(scan["amd-unsuppressed"]["failed"]) == sorted(suppressed_checks([], True))
    for check in skipped:
        assert check["check_result"]["suppress_comment"] == justification(check["check_id"], "amd")
        assert "MIG" not in check["check_result"]["suppress_comment"]


@pytest.mark.parametrize(("variant", "privileged"), [("default", True), ("whole-gpus", False)])
def test_each_suppression_is_a_real_finding_with_a_justification(
        scan: dict[str, dict[str, list[dict[str, Any]]]], variant: str, privileged: bool) -> None:
    skipped = scan[variant]["skipped"]
    # What the annotations suppress is exactly what checkov finds without them: none is idle.
    assert _ids(skipped) == _ids(scan[f"{variant}-unsuppressed" if variant != "default" else "unsuppressed"]["failed"])
    for check in skipped:
        assert check["resource"].startswith("DaemonSet.")
        assert check["check_result"]["suppress_comment"] == justification(check["check_id"])
    capabilities = [] if privileged else agent_capabilities(AgentConfig())
    assert _ids(skipped) == sorted(suppressed_checks(capabilities, privileged))


def test_an_image_without_digest_is_reported_not_suppressed(
        scan: dict[str, dict[str, list[dict[str, Any]]]]) -> None:
    assert _ids(scan["unpinned"]["failed"]) == ["CKV_K8S_43"]
