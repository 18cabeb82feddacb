"""Data the tests read from ``../shared`` (never copied into the repository): find it, or skip / fail.

A fresh clone has no ``../shared``: the tests that need it skip and say where they looked. Under
CI (``CI`` set to anything but ``""``/``0``/``false``) a missing folder fails the test instead, so a
CI job without the data cannot pass by skipping. ``DRA_SHARED_DIR`` points at another copy.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[1]

__all__ = ["find_shared", "in_ci", "shared_path"]


def in_ci() -> bool:
    """Whether the ``CI`` environment variable says this is a CI run."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def find_shared(relative: str) -> Path:
    """``$DRA_SHARED_DIR/relative``, else ``shared/relative`` in the nearest ancestor of the repository
    that has it (a worktree may sit folders below), else ``../shared/relative`` (which may not exist)."""
    base = os.environ.get("DRA_SHARED_DIR")
    if base:
        return Path(base) / relative
    for parent in _REPO.parents:
        candidate = parent / "shared" / relative
        if candidate.exists():
            return candidate
    return _REPO.parent / "shared" / relative


def shared_path(relative: str, what: str | None = None, override: str | None = None) -> Path:
    """The existing path of ``relative`` (e.g. ``"schemas/kueue"``); skips the test when it is absent
    (fails under CI). ``override``: an environment variable whose value, when set, is used instead."""
    path = Path(os.environ[override]) if override and os.environ.get(override) else find_shared(relative)
    if path.exists():
        return path
    how = f"set {override} or DRA_SHARED_DIR" if override else "set DRA_SHARED_DIR"
    message = (f"{what or relative} not found at {path} (a checkout without ../shared/{relative}; "
               f"{how} to point at a copy)")
    if in_ci():
        pytest.fail(f"CI=true but {message}", pytrace=False)
    pytest.skip(message)
