"""The sdist carries what its README, docs and Makefile point to: docs/, images/, dist/ (issue 22 item 11)."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Built through the backend's PEP 517 hook, offline (hatchling is a dev dependency).
_BUILD = "import sys; from hatchling.build import build_sdist; print(build_sdist(sys.argv[1]))"


def _tracked(folder: str) -> set[str]:
    out = subprocess.run(["git", "ls-files", folder], cwd=ROOT, capture_output=True, text=True)
    if out.returncode == 0 and out.stdout.strip():
        return set(out.stdout.split())
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / folder).rglob("*") if p.is_file()}


def test_the_sdist_carries_docs_images_and_dist(tmp_path: Path) -> None:
    name = subprocess.run([sys.executable, "-c", _BUILD, str(tmp_path)], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.strip().splitlines()[-1]
    with tarfile.open(tmp_path / name) as archive:
        prefix = archive.getnames()[0].split("/")[0]
        members = {n.removeprefix(prefix + "/") for n in archive.getnames()}
    for folder in ("docs", "images", "dist", "src", "tests", "examples"):
        missing = sorted(_tracked(folder) - members)
        assert not missing, f"the sdist lacks {folder}/ files: {missing[:10]}"
    assert {"images/sanitizer/Dockerfile", "images/sanitizer/requirements.txt", "docs/topology.md",
            "README.md", "Makefile", "pyproject.toml"} <= members
