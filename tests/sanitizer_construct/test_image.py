"""The agent image (images/sanitizer) installs every third-party package the zipapp imports."""

from __future__ import annotations

import ast
import io
import re
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
    lines = (IMAGE_DIR / "requirements.txt").read_text().splitlines()
    listed = {_normalize(re.split(r"[=~<>!\[ ]", line.strip(), maxsplit=1)[0])
              for line in lines if line.strip() and not line.startswith("#")}
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
    assert "dra_constructs" not in dockerfile and "pip install ." not in dockerfile
