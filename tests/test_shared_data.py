"""tests/shared_data.py: data from ../shared is found, or the test skips (fails under CI=true)."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_data import in_ci, shared_path


def test_found_where_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "schemas" / "kueue").mkdir(parents=True)
    monkeypatch.setenv("DRA_SHARED_DIR", str(tmp_path))
    assert shared_path("schemas/kueue") == tmp_path / "schemas" / "kueue"
    monkeypatch.setenv("DRA_CORPUS_DIR", str(tmp_path / "schemas"))
    assert shared_path("corpus/realworld", override="DRA_CORPUS_DIR") == tmp_path / "schemas"


@pytest.mark.parametrize("ci", ["", "0", "false"])
def test_missing_data_skips_outside_ci(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("DRA_SHARED_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setenv("CI", ci)
    assert not in_ci()
    with pytest.raises(pytest.skip.Exception, match=r"Kueue CRD schemas not found at .*nowhere/schemas/kueue"):
        shared_path("schemas/kueue", "Kueue CRD schemas")


@pytest.mark.parametrize("ci", ["true", "1", "TRUE"])
def test_missing_data_fails_under_ci(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("DRA_SHARED_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match=r"CI=true but the real-world corpus not found"):
        shared_path("corpus/realworld", "the real-world corpus")
