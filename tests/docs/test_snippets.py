"""The docs' Python snippets run as written and pass ``mypy --strict`` (the repo's settings).

Markers and their meaning: tests/docs/markdown.py and CONTRIBUTING.md. Each failure names the
doc and line of the snippet (and of the error inside it).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .markdown import MAX_FRAGMENTS, ROOT, Program, programs, python_blocks

PROGRAMS = programs()


def _file_name(program: Program) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", program.name).strip("_") + ".py"


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_snippet_runs(program: Program, tmp_path: Path) -> None:
    script = tmp_path / _file_name(program)
    script.write_text(program.code)
    env = {**os.environ, "CDK8S_OUTDIR": str(tmp_path / "dist"), "PYTHONPATH": ""}
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    if result.returncode != 0:
        tail = result.stderr.strip().splitlines()[-15:]
        lines = [int(n) for n in re.findall(rf'File "{re.escape(str(script))}", line (\d+)', result.stderr)]
        at = program.doc_line(lines[-1]) if lines else program.first.where
        pytest.fail(f"the snippet at {program.name} fails at {at} (exit {result.returncode}):\n" + "\n".join(tail))


#: The repo's own settings (strict, the pydantic plugin), and a user's project: ``--strict`` without
#: the plugin, where pydantic models are typed by their annotations and ``alias=`` names.
MYPY_MODES = {
    "repo-config": ["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(ROOT / ".mypy_cache")],
    "user-strict": ["--config-file", "/dev/null", "--strict", "--ignore-missing-imports",
                    "--cache-dir", str(ROOT / ".mypy_cache" / "user-strict")],
}


@pytest.mark.parametrize("mode", sorted(MYPY_MODES))
def test_snippets_type_check(mode: str, tmp_path: Path) -> None:
    """One mypy run over every program (in ``mode``); errors name the doc line."""
    by_file: dict[str, Program] = {}
    for program in PROGRAMS:
        name = _file_name(program)
        (tmp_path / name).write_text(program.code)
        by_file[name] = program
    result = subprocess.run(
        [sys.executable, "-m", "mypy", *MYPY_MODES[mode], "--no-error-summary", *sorted(by_file)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    errors = []
    for line in result.stdout.splitlines():
        match = re.match(r"^([^:]+\.py):(\d+): (error|note): (.*)$", line)
        if match and match.group(3) == "error":
            program = by_file[Path(match.group(1)).name]
            errors.append(f"{program.doc_line(int(match.group(2)))} (snippet {program.name}): {match.group(4)}")
    assert result.returncode == 0 or errors, result.stdout + result.stderr
    assert not errors, f"docs snippets that mypy ({mode}) rejects:\n" + "\n".join(errors)


def test_fragments_parse_and_stay_few() -> None:
    fragments = [b for b in python_blocks() if b.marker == "fragment"]
    for block in fragments:
        try:
            ast.parse(block.code)
        except SyntaxError as error:
            pytest.fail(f"{block.doc.name}:{block.line + (error.lineno or 1) - 1}: fragment does not parse: {error}")
    assert len(fragments) <= MAX_FRAGMENTS, (
        f"{len(fragments)} fragments ({', '.join(b.where for b in fragments)}): make snippets whole programs "
        f"(or 'continues' of one) instead; at most {MAX_FRAGMENTS} may be shown without running"
    )


def test_every_python_block_is_run_or_marked() -> None:
    ran = {part.where for program in PROGRAMS for part in program.parts}
    assert all(b.where in ran or b.marker == "fragment" for b in python_blocks())
    assert len(PROGRAMS) >= 8  # README (2), cdk8s-plus, cel, guardrails, sanitizer, tenants, topology
