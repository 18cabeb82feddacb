"""The pure core never imports cdk8s, constructs or jsii (they need Node.js)."""

from __future__ import annotations

import subprocess
import sys

PURE_MODULES = [
    "dra_constructs",
    "dra_constructs.target",
    "dra_constructs.catalog",
    "dra_constructs.requests",
    "dra_constructs.podspec",
    "dra_constructs.cel.builder",
    "dra_constructs.selector_checks",
    "dra_constructs.cli",
    "dra_constructs.tenants",
    "dra_constructs.tenants.quota",
    "dra_constructs.tenants.kueue",
    "dra_constructs.tenants.kueue_versions",
    "dra_constructs.tenants.admission",
    "dra_constructs.guardrails.tenancy",
]


def test_pure_core_does_not_import_cdk8s() -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {PURE_MODULES!r}: importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'cdk8s', 'constructs', 'jsii', 'cdk8s_plus_28'})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == ""


def test_generated_imports_ship_in_the_package() -> None:
    from dra_constructs_l1 import k8s

    assert k8s.KubeResourceClaimTemplateV1Beta1.GVK.api_version == "resource.k8s.io/v1beta1"
    assert k8s.KubeResourceClaimTemplate.GVK.api_version == "resource.k8s.io/v1"


def test_wheel_contains_the_generated_imports(tmp_path: object) -> None:
    import pathlib
    import zipfile

    out = pathlib.Path(str(tmp_path))
    root = pathlib.Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(root)],
                   check=True, capture_output=True)
    (wheel,) = out.glob("dra_constructs-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "dra_constructs_l1/k8s/__init__.py" in names
    assert any(n.startswith("dra_constructs_l1/k8s/_jsii/") and n.endswith(".jsii.tgz") for n in names)
    assert "dra_constructs/py.typed" in names
    assert not any(n.startswith(("tests/", "examples/")) for n in names)


def test_the_audit_rules_load_no_cel_checker_until_one_is_asked_for() -> None:
    """``cel``'s package names load on first use: the rules, the catalog and the tenants import
    ``cel.inventory`` or ``cel.builder`` only, so an export without a selector never pays for the checker,
    the CEL runtime and protobuf (~0.3 s per command); asking for ``cel.check`` loads them."""
    code = (
        "import sys\n"
        "import dra_constructs.guardrails.engine, dra_constructs.guardrails.rules\n"
        "print(sorted(m for m in sys.modules if m in {'dra_constructs.cel.checker', 'dra_constructs.cel._runtime'}))\n"
        "from dra_constructs.cel import check, Device\n"
        "print(check.__module__, Device.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.split("\n")[:2] == ["[]", "dra_constructs.cel.checker dra_constructs.cel.inventory"]
