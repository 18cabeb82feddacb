"""The README's example runs as written and synthesizes schema-valid YAML."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from .helpers import validate_schema

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_example_synthesizes(tmp_path: Path) -> None:
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert code is not None
    assert len(code.group(1).splitlines()) <= 20
    env = {**os.environ, "CDK8S_OUTDIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", code.group(1)], check=True, env=env, cwd=tmp_path, capture_output=True)
    docs = [d for f in sorted(tmp_path.glob("*.k8s.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    kinds = {d["kind"] for d in docs}
    assert {"ResourceClaimTemplate", "Pod", "DaemonSet"} <= kinds
    for doc in docs:
        validate_schema(doc, "1.32")


def test_readme_catalog_table_lists_every_model_and_profile() -> None:
    from dra_constructs.catalog import GPU_SPECS

    text = README.read_text()
    for spec in GPU_SPECS:
        row = next(line for line in text.splitlines() if line.startswith(f"| `{spec.key}` |"))
        for profile in spec.mig_profiles:
            assert f"{profile.name} ({profile.max_count})" in row
        assert f"{spec.memory_mib:,}" in row
