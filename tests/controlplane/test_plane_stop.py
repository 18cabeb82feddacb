"""A session plane stops after the last test of its ``kcp-<minor>`` group in this process (``fixtures.py``)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from . import fixtures


@dataclass
class _Item:
    """What the hooks read of a ``pytest.Item``: its id and its ``xdist_group`` marker."""

    nodeid: str
    group: str | None

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return pytest.mark.xdist_group(self.group).mark if name == "xdist_group" and self.group else None


@pytest.fixture
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Empty bookkeeping for this test (the session's own planes keep theirs)."""
    monkeypatch.setattr(fixtures, "_RUNNING", {})
    monkeypatch.setattr(fixtures, "_PENDING", {})
    monkeypatch.setattr(fixtures, "_STOPPED", set())


@pytest.mark.usefixtures("fresh_state")
def test_the_plane_stops_after_its_groups_last_test_and_not_before() -> None:
    items = [_Item("a", "kcp-9.98"), _Item("b", None), _Item("c", "kcp-9.98"), _Item("d", "kcp-9.99")]
    fixtures.expect(items)  # type: ignore[arg-type]
    stops: list[str] = []
    fixtures._RUNNING["9.98"] = lambda: stops.append("9.98")
    fixtures._RUNNING["9.99"] = lambda: stops.append("9.99")
    for nodeid in ("a", "b"):
        fixtures.stop_when_done(nodeid)
    assert stops == []  # "c" of the group is still to run
    fixtures.stop_when_done("c")
    assert stops == ["9.98"] and "9.98" not in fixtures._RUNNING
    fixtures.stop_when_done("c")  # a second report of the same test stops nothing twice
    assert stops == ["9.98"]
    fixtures.check_not_stopped(items[3])  # type: ignore[arg-type]  # 9.99's plane still runs
    with pytest.raises(pytest.fail.Exception, match=r"9\.98 session plane was stopped"):
        fixtures.check_not_stopped(_Item("late", "kcp-9.98"))  # type: ignore[arg-type]


@pytest.mark.usefixtures("fresh_state")
def test_a_plane_that_never_started_here_is_left_alone() -> None:
    fixtures.expect([_Item("a", "kcp-9.98")])  # type: ignore[list-item]
    fixtures.stop_when_done("a")  # the group's worker was another process: nothing to stop, nothing marked
    assert not fixtures._STOPPED
    fixtures.check_not_stopped(_Item("a", "kcp-9.98"))  # type: ignore[arg-type]
