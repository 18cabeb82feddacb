"""The real kube-scheduler and resourceclaim controller as ``fit``'s oracle (issue 21 item 5).

Every case of ``oracle_cases.all_cases()`` (the examples' workloads on the catalog, and at least
200 generated claim/inventory cases) goes into one cluster; per node of a case one Pod (or, for
count cases, several) pinned to it. The scheduler's verdict per node (bound, or Unschedulable)
must be ``fit``'s (allocatable or not; for count cases how many Pods fit). Differences are
printed and written to ``$ORACLE_REPORT`` (default: the test's tmp dir); docs/fit.md lists them.

Each run has a control plane of its own, started for it and stopped after it (a fresh etcd): its
~260 namespaces, ~500 Nodes and ~700 ResourceSlices leave with it, instead of a cleanup of
~30 s on the session's shared plane (docs/testing.md "Suite time", third round).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from .cluster_access import Cluster, cluster_of
from .fixtures import running_plane
from .oracle_cases import NodeVerdict, all_cases, all_verdicts, prune
from .oracle_cluster import compare, device_differences, run_cases

pytestmark = pytest.mark.controlplane

#: Differences known and not fixed, by case id (each with its reason in docs/fit.md).
KNOWN: dict[str, str] = {}
#: The scheduler's message when its filter timeout passes (``dynamicresources.go``, 1.34 and 1.37).
TIMED_OUT = "timed out trying to allocate devices"


def warned(difference: str, expected: Mapping[str, Mapping[str, NodeVerdict]]) -> bool:
    """A difference ``fit`` announced: it places the Pod with a warning that the scheduler may time
    out (``fit/scheduler_time.py``), and the scheduler did (how fast it is depends on its machine and
    load: case p00 passes on some runs, times out on others)."""
    case_id = difference.split()[0]
    return TIMED_OUT in difference and any(v.warning for v in expected.get(case_id, {}).values())


@pytest.fixture
def fresh_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    """A control plane of ``request.param`` ("1.37") for this test alone, with scheduler and controller manager."""
    for plane in running_plane(request.param, tmp_path / "kcp", allocation=True):
        print(f"control plane {request.param} started: {plane.start_seconds}")
        yield cluster_of(plane)


# The ids and groups of the session planes this test ran on before: the two oracles stay on different
# workers (one group each) and keep their names in --durations lists.
@pytest.mark.parametrize("fresh_cluster", [
    pytest.param("1.37", id="cluster", marks=pytest.mark.xdist_group("kcp-1.37")),
    pytest.param("1.34", id="cluster_134", marks=pytest.mark.xdist_group("kcp-1.34"))], indirect=True)
def test_scheduler_and_fit_agree_on_every_case(fresh_cluster: Cluster, tmp_path: Path) -> None:
    started = time.monotonic()
    target, gates, api = fresh_cluster.target, fresh_cluster.gates, fresh_cluster.admin
    cases = all_cases(target)
    expected = all_verdicts(target, gates)  # once per worker: test_oracle_cases.py shares kcp-1.37's
    cases = [prune(c, expected[c.id], 6 if c.templates else 4) for c in cases]
    rule_version = target.device_taint_rule_api_version or "resource.k8s.io/v1"
    prepared = time.monotonic()
    observed, refused = run_cases(api, cases, expected, taint_rule_version=rule_version,
                                  accepted=lambda d: d.split()[0] in KNOWN or warned(d, expected))
    print(f"cases and verdicts {prepared - started:.1f} s, run {time.monotonic() - prepared:.1f} s")
    differences = compare(cases, expected, observed)
    devices = device_differences(expected, observed)
    report = Path(os.environ.get("ORACLE_REPORT") or tmp_path / "oracle").with_suffix(f".{target}.txt")
    bound = sum(o.bound is not None for o in observed)
    summary = (f"{len(cases)} cases, {len(observed)} Pods: {bound} bound, {len(observed) - bound} unschedulable; "
               f"{len(differences)} verdict difference(s), {len(devices)} with other devices")
    rejections = [f"{case}: {why}" for case, why in sorted(refused.items())]
    report.write_text("\n".join([summary, "", "refused by the API server:", *rejections, "", "verdicts:",
                                 *differences, "", "devices:", *devices]) + "\n")
    print(summary, *rejections, *differences, sep="\n")
    assert rejections == [], "the server refused inventories or claims the library emits or reads"
    assert len([c for c in cases if not c.templates]) >= 200
    assert bound and bound < len(observed), "a generator whose cases all agree one way proves little"
    unknown = [d for d in differences if d.split()[0] not in KNOWN and not warned(d, expected)]
    assert unknown == [], f"{len(unknown)} difference(s), see {report}"
