"""The agent image (images/sanitizer): every third-party import installed; ``make sanitizer-image``."""

from __future__ import annotations

import ast
import io
import re
import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import packages_distributions
from pathlib import Path

from dra_constructs.agent.zipapp import build_zipapp

IMAGE_DIR = Path(__file__).resolve().parents[2] / "images" / "sanitizer"
#: Modules whose distribution is not installed in the test venv (GPU-only extras).
NOT_INSTALLED_HERE = {"cuda": "cuda-bindings"}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _third_party_imports() -> set[str]:
    modules: set[str] = set()
    with zipfile.ZipFile(io.BytesIO(build_zipapp())) as archive:
        for name in archive.namelist():
            if not name.endswith(".py"):
                continue
            for node in ast.walk(ast.parse(archive.read(name))):
                if isinstance(node, ast.Import):
                    modules.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules.add(node.module.split(".")[0])
    return {m for m in modules if m not in sys.stdlib_module_names and m not in ("dra_constructs", "__future__")}


def test_requirements_cover_every_import_of_the_zipapp() -> None:
    lines = [*(IMAGE_DIR / "requirements.txt").read_text().splitlines(),
             *(IMAGE_DIR / "requirements-amd.txt").read_text().splitlines()]  # the AMD image's (vendor="amd")
    listed = {_normalize(re.split(r"[=~<>!\[ ]", line.strip(), maxsplit=1)[0])
              for line in lines if line.strip() and not line.startswith(("#", "-r"))}
    distributions = packages_distributions()
    imports = _third_party_imports()
    assert {"pydantic", "yaml", "kubernetes", "prometheus_client", "pynvml", "cuda"} <= imports
    for module in sorted(imports):
        names = distributions.get(module) or [NOT_INSTALLED_HERE[module]]
        assert {_normalize(n) for n in names} & listed, f"{module} ({names}) is missing from requirements.txt"
    assert "pynvml" not in listed, "the deprecated PyPI pynvml must never be installed (nvidia-ml-py provides it)"


def test_dockerfile_installs_the_requirements_and_bakes_no_agent_code() -> None:
    dockerfile = (IMAGE_DIR / "Dockerfile").read_text()
    assert "-r /tmp/requirements.txt" in dockerfile
    assert "-r /tmp/requirements-amd.txt" in dockerfile  # with --build-arg AMD=1 (vendor="amd")
    assert "dra_constructs" not in dockerfile and "pip install ." not in dockerfile


# --- make sanitizer-image ------------------------------------------------------------------------

ROOT = IMAGE_DIR.parents[1]


def _make(tmp_path: Path, path: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([shutil.which("make") or "make", "-s", "sanitizer-image"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False, env={"PATH": path, "HOME": str(tmp_path), **env})


def _only(tmp_path: Path, *tools: str) -> str:
    """A PATH with only these tools (no container builder, whatever this machine has installed)."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for tool in tools:
        found = shutil.which(tool)
        assert found, f"{tool} is needed to run make"
        (folder / tool).symlink_to(found)
    return str(folder)


def test_make_sanitizer_image_says_so_where_no_builder_exists(tmp_path: Path) -> None:
    result = _make(tmp_path, _only(tmp_path, "make", "sh"))
    assert result.returncode != 0
    assert "no container builder found (docker, podman or buildah" in result.stderr


def _fake_builder(tmp_path: Path, name: str) -> Path:
    """A recording stand-in for docker/podman (argv per call; push writes a digest like the real ones)."""
    log = tmp_path / "calls"
    fake = tmp_path / "fake" / name
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {log}\n'
        'if [ "$1" = inspect ]; then echo "registry.example.com/x@sha256:' + "ab" * 32 + '"; fi\n'
        'if [ "$1" = push ] && [ "$2" = --digestfile ]; then echo "sha256:' + "cd" * 32 + '" > "$3"; fi\n')
    fake.chmod(0o755)
    return fake


def test_make_sanitizer_image_builds_the_dockerfile_with_the_builder_found(tmp_path: Path) -> None:
    fake = _fake_builder(tmp_path, "docker")
    path = _only(tmp_path, "make", "sh")
    result = _make(tmp_path, f"{fake.parent}:{path}", SANITIZER_IMAGE="registry.example.com/x:1",
                   PYTHON_IMAGE="python:3.11-slim-bookworm@sha256:" + "0" * 64, SANITIZER_PUSH="1")
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == ("build --tag registry.example.com/x:1 --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@"
                        f"sha256:{'0' * 64} {IMAGE_DIR}")
    assert calls[1:] == ["push registry.example.com/x:1",
                         "inspect --format {{index .RepoDigests 0}} registry.example.com/x:1"]
    assert f"pushed: registry.example.com/x@sha256:{'ab' * 32}" in result.stdout


def test_make_sanitizer_image_with_podman_reads_the_pushed_digest(tmp_path: Path) -> None:
    fake = _fake_builder(tmp_path, "podman")
    result = _make(tmp_path, f"{fake.parent}:{_only(tmp_path, 'make', 'sh', 'rm')}", SANITIZER_PUSH="1")
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == f"build --tag dra-sanitizer-base:dev {IMAGE_DIR}"
    assert calls[1].startswith("push --digestfile ") and calls[1].endswith(" dra-sanitizer-base:dev")
    assert f"pushed: sha256:{'cd' * 32}" in result.stdout
