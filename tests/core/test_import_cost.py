"""`import dra_constructs` and `dra-constructs --help` import only what they need (issue 14).

No timings here (benchmarks/import_bench.py measures them): these tests check which modules a
fresh interpreter has loaded, which is what the time depends on.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


_CATALOG_ENTRIES = ("pydantic", "dra_constructs.catalog.models", "dra_constructs.catalog.data",
                    "dra_constructs.catalog.amd", "dra_constructs.catalog.devices")


def _catalog_entries(loaded: set[str]) -> list[str]:
    """The loaded modules that are pydantic or the typed catalog (``catalog.amd_driver`` is not)."""
    return sorted(m for m in loaded if m.startswith(_CATALOG_ENTRIES) and m != "dra_constructs.catalog.amd_driver")


def test_the_audit_command_loads_no_pydantic_and_no_catalog_entries() -> None:
    """The rules need the driver's names (``catalog.driver``, ``catalog.amd_driver``) and ``GpuModel``, not the
    typed entries: pydantic and ``catalog.data`` were ~0.4 s of every ``audit`` (docs/performance.md)."""
    loaded = _loaded_after("import dra_constructs.guardrails.cli, dra_constructs.guardrails.stream, "
                           "dra_constructs.guardrails.engine, dra_constructs.guardrails.rules")
    assert "dra_constructs.guardrails.rules.amd_attributes" in loaded  # the probe did load the rules
    assert "dra_constructs.catalog.lookup" in loaded
    assert _catalog_entries(loaded) == []


_NONCOMPLIANT = Path(__file__).resolve().parents[1] / "guardrails" / "fixtures" / "noncompliant"
_CATALOG_FIXTURES = [str(_NONCOMPLIANT / name) for name in (
    "amd-partitions-match-deviceid.yaml", "amd-legacy-and-env.yaml", "kueue-first-available.yaml",
    "tenant-over-quota.yaml", "mig-isolation-other-tenant.yaml", "mig-profile-under-gpu-class-v1beta2.yaml",
)]


def _audit(tmp_path: Path, preload: str) -> tuple[list[dict[str, object]], set[str]]:
    """Findings of ``audit`` over the catalog fixtures in a fresh interpreter, and the modules it loaded."""
    out = tmp_path / f"report-{bool(preload)}.json"
    loaded = _loaded_after(
        f"{preload}\nimport contextlib, io\nfrom dra_constructs.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['audit', '--format', 'json', '-o', {str(out)!r}, *{_CATALOG_FIXTURES!r}])"
    )
    findings: list[dict[str, object]] = json.loads(out.read_text())["findings"]
    return findings, loaded


def test_an_audit_of_what_the_catalog_describes_finds_the_same_without_loading_it(tmp_path: Path) -> None:
    """AMD partitions, MIG profiles, tenant quotas and Kueue queues: audited with the typed catalog loaded up
    front (as every audit did before) and lazily, the findings are identical, and the lazy run loads none of it."""
    eager, eager_loaded = _audit(tmp_path, "import dra_constructs.catalog.data, dra_constructs.catalog.amd, "
                                           "dra_constructs.catalog.devices")
    lazy, lazy_loaded = _audit(tmp_path, "")
    assert "pydantic" in eager_loaded
    assert lazy == eager
    assert {"DRA004", "DRA012", "DRA014", "DRA018", "DRA022"} <= {f["rule"] for f in lazy}
    assert _catalog_entries(lazy_loaded) == []


def test_every_catalog_name_still_imports_from_the_package() -> None:
    """``from dra_constructs.catalog import X`` for every public X; the typed entries load on first use."""
    code = (
        "import sys, json\n"
        "import dra_constructs.catalog as c\n"
        "before = sorted(m for m in sys.modules if m.startswith(('pydantic', 'dra_constructs.catalog.data')))\n"
        "from dra_constructs.catalog import GPU_SPECS, GpuModel, GpuSpec, MigProfile, gpu_spec, mig_profile\n"
        "spec = GpuModel.H100_80GB.spec\n"
        "print(json.dumps([before, [n for n in c.__all__ if getattr(c, n) is None], spec is gpu_spec('h100-80gb'),\n"
        "  spec in GPU_SPECS, isinstance(spec, GpuSpec), isinstance(mig_profile('H100_80GB', '1g.10gb'), MigProfile),\n"
        "  GpuModel.__module__, len(c.catalog_resource_slices()) > 0]))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert json.loads(out.stdout) == [[], [], True, True, True, True, "dra_constructs.catalog", True]
    import dra_constructs.catalog as catalog

    with pytest.raises(AttributeError):
        catalog.NoSuchName  # noqa: B018


def test_the_amd_catalog_still_exports_the_driver_names() -> None:
    from dra_constructs.catalog import amd, amd_driver

    for name in amd_driver.__all__:
        assert getattr(amd, name) is getattr(amd_driver, name), name
        assert name in amd.__all__, name
