"""`import dra_constructs` and `dra-constructs --help` import only what they need (issue 14).

No timings here (benchmarks/import_bench.py measures them): these tests check which modules a
fresh interpreter has loaded, which is what the time depends on.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dra_constructs import cli

_HEAVY = ("pydantic", "google.protobuf", "yaml", "cdk8s", "jsii", "dra_constructs.cel", "dra_constructs.catalog",
          "dra_constructs.guardrails")


def _loaded_after(code: str) -> set[str]:
    probe = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_import_dra_constructs_loads_no_heavy_module() -> None:
    loaded = _loaded_after("import dra_constructs")
    assert not [m for m in loaded if m.startswith(_HEAVY)]


def test_help_loads_no_subcommand_module() -> None:
    loaded = _loaded_after(
        "import contextlib, io\nfrom dra_constructs.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main(['--help'])\n    except SystemExit:\n        pass"
    )
    assert not [m for m in loaded if m.startswith(_HEAVY)]


def test_public_names_still_resolve() -> None:
    import dra_constructs

    for name in dra_constructs.__all__:
        assert getattr(dra_constructs, name) is not None, name
    with pytest.raises(AttributeError):
        dra_constructs.NoSuchName  # noqa: B018


def test_fast_help_lists_the_same_commands_as_the_full_parser() -> None:
    full = cli.build_parser().format_help()
    fast = cli.build_parser("").format_help()
    assert fast == full


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_a_command_gets_its_full_parser(command: str) -> None:
    full = cli.build_parser()
    fast = cli.build_parser(command)
    def sub(parser: object, name: str) -> str:
        action = next(a for a in parser._subparsers._group_actions)  # type: ignore[attr-defined]
        return str(action.choices[name].format_help())
    assert sub(fast, command) == sub(full, command)
    assert fast.format_help() == full.format_help()
