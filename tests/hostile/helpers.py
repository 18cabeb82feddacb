"""Run the command line in a fresh process with the acceptance limits: 60 s, 2 GB of address space."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60
MEMORY_BYTES = 2 * 1024**3


@dataclass(frozen=True)
class Run:
    rc: int
    stdout: str
    stderr: str


def _limits(close_stdin: bool, close_stdout: bool = False) -> Any:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
        if close_stdin:
            os.close(0)
        if close_stdout:
            os.close(1)
    return apply


def run_cli(*args: str, stdin: bytes | None = None, stdin_file: str | None = None, close_stdin: bool = False,
            module: str = "dra_constructs.cli", cwd: Path | None = None, close_stdout: bool = False) -> Run:
    """``python -m dra_constructs.cli ARGS`` under the limits; fails the test on a timeout."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "imports")]),
           "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    kwargs: dict[str, Any] = {}
    if stdin is not None:
        kwargs["input"] = stdin
    elif not close_stdin and stdin_file is None:
        kwargs["stdin"] = subprocess.DEVNULL
    with open(stdin_file or os.devnull, "rb") as handle:
        if stdin_file is not None:
            kwargs["stdin"] = handle
        done = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, timeout=TIMEOUT_S,
                              preexec_fn=_limits(close_stdin, close_stdout), env=env, cwd=cwd, check=False, **kwargs)
    return Run(done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"))


def assert_clean(run: Run, *codes: int) -> None:
    """Exit code among ``codes`` (default: the contract's 0, 1, 2), and no traceback."""
    assert run.rc in (codes or (0, 1, 2)), (run.rc, run.stderr[-2000:])
    assert "Traceback" not in run.stderr, run.stderr[-4000:]
    assert "out of memory" not in run.stderr, run.stderr[-500:]  # a limit, not the rlimit, must stop it


def assert_input_error(run: Run, *words: str) -> None:
    """Exit 2 with one clean ``error:`` line naming ``words`` (file, limit, ...)."""
    assert_clean(run, 2)
    for word in words:
        assert word in run.stderr, (word, run.stderr[-2000:])
