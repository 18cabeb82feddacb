"""The folders show the layers: the pure core, ``constructs/`` (synth, cdk8s) and ``agent/`` (node)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "dra_constructs"
CDK8S = ("cdk8s", "constructs", "jsii", "cdk8s_plus_28", "dra_constructs_l1")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def _layer(path: Path) -> str:
    top = path.relative_to(PACKAGE).parts[0]
    return top if top in ("constructs", "agent") else "core"


def test_only_the_construct_layer_imports_cdk8s() -> None:
    offenders = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if _layer(path) != "constructs" and any(name.split(".")[0] in CDK8S for name in _imports(path))
    )
    assert offenders == []


def test_the_core_and_the_agent_never_import_the_construct_layer() -> None:
    offenders = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        # testing.py is the public name (dra_constructs.testing) of constructs/testing.py, a re-export.
        if _layer(path) != "constructs" and path.name not in ("__init__.py", "_moved.py")
        and path != PACKAGE / "testing.py"
        and any(name.startswith("dra_constructs.constructs") for name in _imports(path))
    )
    assert offenders == []


def test_the_core_never_imports_the_agent() -> None:
    # The package root re-exports the agent's PreemptionPolicy model (lazily) as public API.
    offenders = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if _layer(path) == "core" and path != PACKAGE / "__init__.py"
        and any(name.startswith("dra_constructs.agent") for name in _imports(path))
    )
    assert offenders == []


def test_scope_helpers_and_guardrails_do_not_import_each_other() -> None:
    scope = _imports(PACKAGE / "constructs" / "scope.py")
    assert not any(name.startswith("dra_constructs.constructs.guardrails") for name in scope)


def test_old_import_paths_are_the_moved_modules() -> None:
    from dra_constructs._moved import MOVED

    for old, new in MOVED.items():
        assert importlib.import_module(old) is importlib.import_module(new), old
    from dra_constructs.sanitizer.runtime.cli import main  # the 0.1 agent entry point

    assert main.__module__ == "dra_constructs.agent.cli"


def test_old_agent_path_does_not_load_cdk8s() -> None:
    code = (
        "import sys, dra_constructs.sanitizer.runtime.barrier\n"
        f"print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in {CDK8S!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == ""
