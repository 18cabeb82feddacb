"""Run oracle cases on a real cluster: the scheduler's verdict per pinned Pod, compared with ``fit``.

All cases go into the cluster at once (a namespace per case; Nodes and slices named by case),
first the inventories, then the claims and Pods; then the runner polls the Pods until each is
bound or carries ``PodScheduled=False`` (``Unschedulable``). A verdict that disagrees with
``fit`` gets a grace period (a scheduler retries a Pod when an inventory event arrives late)
before it counts as a difference.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .apiclient import Api, ApiFailure, in_parallel
from .oracle_cases import CASE_LABEL, Case, NodeVerdict, server_classes

__all__ = ["Observed", "compare", "create_inventories", "device_differences", "run_cases"]

RUN_LABEL = "oracle.dra-constructs.io/run"
ADMIN_LABEL = "resource.kubernetes.io/admin-access"
PAUSE = "registry.k8s.io/pause:3.10"


@dataclass
class Observed:
    """The scheduler's verdict on one Pod: bound node, or the Unschedulable message; its devices."""

    case: str
    node: str
    index: int
    bound: str | None = None
    unschedulable: str | None = None
    devices: tuple[tuple[str, str, str], ...] = ()

    @property
    def decided(self) -> bool:
        return self.bound is not None or self.unschedulable is not None


def namespace_of(case: Case) -> str:
    return f"oracle-{case.id}"


def _labelled(obj: Mapping[str, Any]) -> dict[str, Any]:
    body = dict(obj)
    metadata = dict(body.get("metadata") or {})
    metadata["labels"] = {**(metadata.get("labels") or {}), RUN_LABEL: "1"}
    body["metadata"] = metadata
    return body


def _device_class(name: str, selectors: Sequence[str]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in selectors]}}


def create_inventories(api: Api, cases: Sequence[Case], taint_rule_version: str) -> dict[str, str]:
    """DeviceClasses (shared), then per case its namespace, Nodes, slices and DeviceTaintRules.

    Returns the cases the server refused an object of (case id -> the refusal): they get no Pods.
    """
    classes = [_device_class(c.name, c.selectors) for c in server_classes().values()]
    classes += [c for case in cases for c in case.classes]
    for body in {c["metadata"]["name"]: c for c in classes}.values():
        api.create(body, exist_ok=True)

    def one(case: Case) -> str | None:
        labels = {RUN_LABEL: "1", **({ADMIN_LABEL: "true"} if case.admin else {})}
        try:
            api.create({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": namespace_of(case), "labels": labels}})
            for obj in case.nodes:
                api.create(_labelled(obj))
            for obj in case.slices:
                api.create(_labelled(obj), params={"fieldValidation": "Strict"})
            for obj in case.taint_rules:
                api.create(_labelled({**obj, "apiVersion": taint_rule_version}), params={"fieldValidation": "Strict"})
            if case.templates:
                for claim in case.claims:
                    api.create(claim, namespace_of(case), params={"fieldValidation": "Strict"})
        except ApiFailure as failure:
            return str(failure)
        return None

    return {case.id: refusal for case, refusal in zip(cases, in_parallel(one, cases), strict=True) if refusal}


def _pod(case: Case, node: str, node_index: int, k: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The claims (copies for this Pod) and the Pod pinned to ``node``."""
    suffix = f"{node_index}-{k}"
    claims, refs = [], []
    if case.templates:
        assert case.pod_spec is not None
        refs = list(case.pod_spec.get("resourceClaims") or [])
        originals = [*(case.pod_spec.get("initContainers") or []), *(case.pod_spec.get("containers") or [])]
        containers = [{"name": c["name"], "image": PAUSE,
                       "resources": {"claims": (c.get("resources") or {}).get("claims") or []}} for c in originals]
    else:
        for index, claim in enumerate(case.claims):
            name = f"{claim['metadata']['name']}-{suffix}"
            claims.append({**claim, "metadata": {"name": name}})
            refs.append({"name": f"c{index}", "resourceClaimName": name})
        containers = [{"name": "c", "image": PAUSE, "resources": {"claims": [{"name": r["name"]} for r in refs]}}]
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"p-{suffix}", "labels": {RUN_LABEL: "1", CASE_LABEL: case.id}},
           "spec": {"containers": containers, "resourceClaims": refs,
                    "tolerations": [{"operator": "Exists"}],  # fake Nodes go NotReady without a kubelet
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}}}
    return claims, pod


def _create_pods(api: Api, cases: Sequence[Case], refused: dict[str, str]) -> list[Observed]:
    """Per Pod its claims (the templates are there already), then the Pod; refusals go to ``refused``."""
    jobs = [(case, node, i, k) for case in cases for i, node in enumerate(case.node_names) for k in range(case.pods)]

    def one(job: tuple[Case, str, int, int]) -> Observed | None:
        case, node, i, k = job
        claims, pod = _pod(case, node, i, k)
        try:
            if not case.templates:
                for claim in claims:
                    api.create(claim, namespace_of(case), params={"fieldValidation": "Strict"})
            api.create(pod, namespace_of(case), params={"fieldValidation": "Strict"})
        except ApiFailure as failure:
            refused[case.id] = str(failure)
            return None
        return Observed(case.id, node, k)

    return [o for o in in_parallel(one, jobs) if o is not None and o.case not in refused]


def _poll(api: Api, observed: dict[tuple[str, str], Observed]) -> None:
    for pod in api.list("v1", "Pod", labelSelector=f"{RUN_LABEL}=1"):
        namespace = pod["metadata"]["namespace"]
        key = (namespace, pod["metadata"]["name"])
        seen = observed.get(key)
        if seen is None:
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            seen.bound, seen.unschedulable = node, None
            continue
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False" \
                    and condition.get("reason") in ("Unschedulable", "SchedulerError"):
                seen.unschedulable = f"{condition['reason']}: {condition.get('message')}"


def _devices(api: Api, observed: dict[tuple[str, str], Observed], pods: Mapping[tuple[str, str], Any]) -> None:
    claims = {(c["metadata"]["namespace"], c["metadata"]["name"]): c
              for c in api.list("resource.k8s.io/v1", "ResourceClaim")
              if c["metadata"]["namespace"].startswith("oracle-")}
    for key, seen in observed.items():
        if seen.bound is None:
            continue
        pod = pods[key]
        names = {s["name"]: s.get("resourceClaimName") for s in (pod.get("status") or {}).get(
            "resourceClaimStatuses") or []}
        found = []
        for ref in pod["spec"].get("resourceClaims") or []:
            name = ref.get("resourceClaimName") or names.get(ref["name"])
            claim = claims.get((key[0], name or ""))
            if claim is None:
                continue
            base = (claim["metadata"].get("annotations") or {}).get("resource.kubernetes.io/pod-claim-name") \
                or ref["name"]
            results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
            found += [(base, r["request"], f"{r['driver']}/{r['pool']}/{r['device']}") for r in results]
        seen.devices = tuple(found)


def run_cases(api: Api, cases: Sequence[Case], expected: Mapping[str, Mapping[str, NodeVerdict]], *,
              taint_rule_version: str, timeout_s: float = 150.0, grace_s: float = 15.0,
              accepted: Callable[[str], bool] | None = None) -> tuple[list[Observed], dict[str, str]]:
    """Create everything, wait for every verdict, give disagreeing ones ``grace_s`` to change.

    ``accepted``: differences (lines of :func:`compare`) the caller accepts either way; the grace
    period ends early when only those are left (it cannot change a verdict the caller accepts).
    Returns the verdicts and the cases whose inventory or claims the server refused.
    """
    refused = create_inventories(api, cases, taint_rule_version)
    cases = [c for c in cases if c.id not in refused]
    time.sleep(2.0)  # let the scheduler's informers see the inventories before the Pods
    created = _create_pods(api, cases, refused)
    observed = {(f"oracle-{o.case}", f"p-{cases_index(cases, o)}-{o.index}"): o for o in created}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _poll(api, observed)
        if all(o.decided for o in observed.values()):
            break
        time.sleep(1.0)
    grace = time.monotonic() + grace_s

    def open_differences() -> list[str]:
        lines = compare(cases, expected, list(observed.values()), final=False)
        return [d for d in lines if accepted is None or not accepted(d)]

    while time.monotonic() < grace and open_differences():
        time.sleep(1.0)
        _poll(api, observed)
    pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p
            for p in api.list("v1", "Pod", labelSelector=f"{RUN_LABEL}=1")}
    _devices(api, observed, pods)
    return list(observed.values()), refused


def cases_index(cases: Sequence[Case], observed: Observed) -> int:
    case = next(c for c in cases if c.id == observed.case)
    return case.node_names.index(observed.node)


def compare(cases: Sequence[Case], expected: Mapping[str, Mapping[str, NodeVerdict]],
            observed: Sequence[Observed], *, final: bool = True) -> list[str]:
    """Verdict differences, one line each (``final``: undecided Pods count as differences too)."""
    by_node: dict[tuple[str, str], list[Observed]] = {}
    for seen in observed:
        by_node.setdefault((seen.case, seen.node), []).append(seen)
    titles = {c.id: c.title for c in cases}
    differences = []
    for (case_id, node), seen in sorted(by_node.items()):
        verdict = expected[case_id][node]
        want = min(verdict.count, len(seen))
        bound = [s for s in seen if s.bound is not None]
        undecided = [s for s in seen if not s.decided]
        if undecided and not final:
            differences.append(f"{case_id} {node}: undecided")
            continue
        if len(bound) != want or any(s.bound != node for s in bound):
            messages = sorted({s.unschedulable or "" for s in seen if s.unschedulable})
            differences.append(
                f"{case_id} ({titles[case_id]}) on {node}: fit places {want} of {len(seen)} Pod(s), the scheduler "
                f"bound {len(bound)}, {len(undecided)} undecided; fit: {verdict.reason or verdict.devices}; "
                f"scheduler: {'; '.join(messages)[:400]}")
    return differences


def device_differences(expected: Mapping[str, Mapping[str, NodeVerdict]], observed: Sequence[Observed]) -> list[str]:
    """Same verdict, other devices (one-Pod cases; identical Pods of a count case bind in any order)."""
    lines = []
    pods: dict[tuple[str, str], int] = {}
    for seen in observed:
        pods[(seen.case, seen.node)] = pods.get((seen.case, seen.node), 0) + 1
    for seen in observed:
        verdict = expected[seen.case][seen.node]
        if seen.bound is None or not verdict.allocatable or pods[(seen.case, seen.node)] > 1:
            continue
        mine = sorted((request, device) for _, request, device in verdict.devices)
        theirs = sorted((request, device) for _, request, device in seen.devices)
        if mine != theirs:
            lines.append(f"{seen.case} {seen.node}: fit {mine} scheduler {theirs}")
    return lines

