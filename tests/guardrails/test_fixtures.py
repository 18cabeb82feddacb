"""Realistic manifests: every non-compliant fixture gets exactly its rules, no compliant one an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import FIXTURES, audit_file, expectations, rules_of

NONCOMPLIANT = sorted((FIXTURES / "noncompliant").iterdir())
COMPLIANT = sorted((FIXTURES / "compliant").iterdir())


@pytest.mark.parametrize("path", NONCOMPLIANT, ids=lambda p: p.name)
def test_noncompliant_fixture_is_flagged_by_its_rules(path: Path) -> None:
    expected_errors, expected_warnings = expectations(path)
    assert expected_errors, f"{path.name} declares no expected rule"
    result = audit_file(path)
    assert rules_of(result, "error") == expected_errors
    if expected_warnings:
        assert rules_of(result, "warning") == expected_warnings


@pytest.mark.parametrize("path", COMPLIANT, ids=lambda p: p.name)
def test_compliant_fixture_has_no_error(path: Path) -> None:
    expected_errors, expected_warnings = expectations(path)
    assert not expected_errors
    result = audit_file(path)
    assert result.errors == ()
    assert rules_of(result, "warning") == expected_warnings


@pytest.mark.parametrize("path", NONCOMPLIANT, ids=lambda p: p.name)
def test_every_flagged_object_is_located(path: Path) -> None:
    for finding in audit_file(path).errors:
        assert finding.file == str(path)
        assert finding.line is not None and finding.line >= 1
        assert finding.path and finding.message and finding.fix


def test_directory_audit_keeps_file_boundaries_of_objects() -> None:
    # Auditing all compliant fixtures together: the tenant namespaces meet, so DRA009 must see
    # the sanitizer DaemonSet of multi-tenant-with-sanitizer.yaml and stay quiet.
    result = audit_file(FIXTURES / "compliant", "1.34")
    assert result.errors == ()
    assert result.objects_scanned == sum(audit_file(p).objects_scanned for p in COMPLIANT)
