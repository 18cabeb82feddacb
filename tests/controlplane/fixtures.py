"""Session fixtures of the real control plane (one cluster per version and pytest worker).

``control_plane_137`` / ``control_plane_134``: etcd + kube-apiserver, ready; call ``.ensure_allocation()``
for kube-scheduler + kube-controller-manager. Tests using them carry ``@pytest.mark.controlplane``
and ``@pytest.mark.xdist_group("kcp-<minor>")``: the group puts them on one worker, and
``tests/conftest.py`` stops a plane as soon as the last test of its group has run in this process
(:func:`stop_when_done`) instead of at the end of the session. An idle plane with its scheduler and
controller manager costs ~5% of a core (docs/testing.md "Where the suite stands").
Not built: skip naming ``make controlplane``; under CI=true that fails instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.cluster import ControlPlane, ControlPlaneUnavailable, ci, start_control_plane

#: The session planes started in this process, by minor: their stop (idempotent).
_RUNNING: dict[str, Callable[[], None]] = {}
#: Per minor, the tests of group ``kcp-<minor>`` not finished yet in this process (:func:`expect`).
_PENDING: dict[str, set[str]] = {}
#: Minors whose plane was stopped early: a test of theirs after that is a grouping mistake.
_STOPPED: set[str] = set()


def group_minor(item: pytest.Item) -> str | None:
    """The minor of the ``kcp-<minor>`` group ``item`` belongs to, if any."""
    marker = item.get_closest_marker("xdist_group")
    name = (marker.args[0] if marker.args else marker.kwargs.get("name")) if marker else None
    return name[len("kcp-"):] if isinstance(name, str) and name.startswith("kcp-") else None


def expect(items: Iterable[pytest.Item]) -> None:
    """Record which tests each session plane serves (every ``kcp-<minor>`` test collected)."""
    _PENDING.clear()
    for item in items:
        minor = group_minor(item)
        if minor is not None:
            _PENDING.setdefault(minor, set()).add(item.nodeid)


def check_not_stopped(item: pytest.Item) -> None:
    """Fail a test whose plane was stopped already (it would otherwise fail on a refused connection)."""
    minor = group_minor(item)
    if minor in _STOPPED:
        pytest.fail(f"the {minor} session plane was stopped after its group's last test; {item.nodeid} "
                    "was not counted in it (tests/controlplane/fixtures.py)")


def stop_when_done(nodeid: str) -> None:
    """After ``nodeid`` has run: stop each plane of this process whose group has no test left.

    A worker of ``--dist loadgroup`` runs a whole group, so the plane goes once that worker is through
    its group; in a worker that runs none of a group's tests the plane never started.
    """
    for minor, pending in _PENDING.items():
        pending.discard(nodeid)
        if not pending and minor in _RUNNING:
            _RUNNING.pop(minor)()
            _STOPPED.add(minor)


def _plane(minor: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    for plane in running_plane(minor, tmp_path_factory.mktemp(f"kcp-{minor}")):
        _RUNNING[minor] = plane.stop
        yield plane
        _RUNNING.pop(minor, None)


def running_plane(minor: str, work: Path, **options: Any) -> Iterator[ControlPlane]:
    """A control plane of ``minor`` in ``work`` for a fixture to yield; skips without one (fails under CI)."""
    try:
        context = start_control_plane(minor, work, **options)
        plane = context.__enter__()
    except ControlPlaneUnavailable as exc:
        if ci():
            pytest.fail(f"CI=true needs the real control plane: {exc}")
        pytest.skip(str(exc))
    try:
        yield plane
    finally:
        context.__exit__(None, None, None)


@pytest.fixture(scope="session")
def control_plane_137(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    yield from _plane("1.37", tmp_path_factory)


@pytest.fixture(scope="session")
def control_plane_134(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    yield from _plane("1.34", tmp_path_factory)
