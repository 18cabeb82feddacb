"""Every example synthesizes to its YAML snapshot and validates against the target's schema."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import cdk8s
import pytest
import yaml
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from dra_constructs import set_kubernetes_version

from .helpers import validate_any_schema

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES_DIR))
MAIN: Any = importlib.import_module("main")


class YamlSnapshot(SingleFileSnapshotExtension):
    """One readable YAML file per snapshot."""

    file_extension = "yaml"
    _write_mode = WriteMode.TEXT


def mask_runtime(text: str) -> str:
    """Mask the sanitizer's embedded runtime (zipapp bytes, its hashes and the pod's copies, the ConfigMap name).

    The snapshot pins the manifests; ``tests/sanitizer_construct`` pins and runs the runtime they
    carry, and ``dist/`` (checked for staleness in CI) carries the exact bytes.
    """
    text = re.sub(r"(agent\.pyz: )\S+", r"\1<zipapp base64>", text)
    text = re.sub(r"(runtime-sha256: |config-sha256: )[0-9a-f]{64}", r"\1<sha256>", text)
    text = re.sub(r"(name: DRA_SANITIZER_(?:RUNTIME|CONFIG)_SHA256\n\s+value: )[0-9a-f]{64}", r"\1<sha256>", text)
    return re.sub(r"(-runtime-)[0-9a-f]{8,}", r"\1<hash>", text)


def synth_example(example: ModuleType, version: str) -> list[dict[str, Any]]:
    app = cdk8s.Testing.app()
    set_kubernetes_version(app, version)
    example.build(app)
    docs: list[dict[str, Any]] = []
    for chart in app.charts:
        docs.extend(dict(d) for d in cdk8s.Testing.synth(chart))
    return docs


@pytest.mark.parametrize(("example", "version"), [
    pytest.param(example, version, id=f"{example.__name__}-{version}")
    for example in MAIN.EXAMPLES for version in sorted(MAIN.TARGETS) if version in MAIN.targets_of(example)
])
def test_example_snapshot_and_schema(example: ModuleType, version: str, snapshot: SnapshotAssertion) -> None:
    docs = synth_example(example, version)
    assert docs, "an example must emit manifests"
    for doc in docs:
        validate_any_schema(doc, version)
    text = mask_runtime(yaml.safe_dump_all(docs, sort_keys=True, width=1 << 30))
    assert text == snapshot.use_extension(YamlSnapshot)


def test_dist_validates_against_its_target_schema() -> None:
    dist = EXAMPLES_DIR.parent / "dist"
    files = sorted(dist.rglob("*.k8s.yaml"))
    # Which examples dist/ holds is the staleness check's job (scripts/synth_examples.py --check dist).
    assert {f.parent.name for f in files} <= {m.__name__ for m in MAIN.EXAMPLES} | {"k8s-1.34"}
    for path in files:
        version = "1.34" if "k8s-1.34" in path.parts else "1.32"
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                validate_any_schema(doc, version)
