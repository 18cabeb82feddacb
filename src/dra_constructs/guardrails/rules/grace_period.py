"""DRA008: GPU pods have a preemption grace path (terminationGracePeriodSeconds, preStop)."""

from __future__ import annotations

from collections.abc import Iterator

from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.facets import POD
from dra_constructs.guardrails.manifest import Manifest, PodView, as_dict, field_path
from dra_constructs.guardrails.model import Hit, Rule, Severity

__all__ = ["MANAGED_BY_LABEL", "RULE"]

#: Objects the library builds carry this label; for them a missing preStop hook is an error.
MANAGED_BY_LABEL = ("app.kubernetes.io/managed-by", "dra-constructs")


def _check(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    managed = m.pod_labels().get(MANAGED_BY_LABEL[0]) == MANAGED_BY_LABEL[1]
    for pod in m.pods:
        if ctx.is_gpu_pod_spec(m, pod):
            yield from _pod_hits(pod, managed)


def _pod_hits(pod: PodView, managed: bool) -> Iterator[Hit]:
    grace = pod.spec.get("terminationGracePeriodSeconds")
    path = field_path(pod.path, "terminationGracePeriodSeconds")
    if grace is None:
        yield Hit(path, "GPU pod leaves terminationGracePeriodSeconds to the 30 s default; state the time the "
                        "workload needs to checkpoint and release its device after SIGTERM",
                  severity=Severity.WARNING)
    elif isinstance(grace, bool) or not isinstance(grace, int) or grace < 1:
        yield Hit(path, f"terminationGracePeriodSeconds is {grace!r}: on preemption the GPU workload is killed "
                        "at once, with no SIGTERM grace to drain its device")
    if not managed:
        return
    for cpath, container in pod.containers(include_init=False):
        if "preStop" not in as_dict(as_dict(container.get("lifecycle"))):
            yield Hit(field_path(cpath, "lifecycle", "preStop"),
                      f"container {container.get('name')!r} of a dra-constructs pod has no preStop hook",
                      fix="build the pod with dra-constructs' pre_stop= (default PreStop())")


RULE = Rule(
    id="DRA008",
    name="preemption-grace-path",
    severity=Severity.ERROR,
    why="preemption must signal the workload (SIGTERM, grace period, preStop) before its device is revoked "
        "and sanitized",
    fix="set terminationGracePeriodSeconds (>= 1, e.g. 60) on GPU pods and a preStop hook on their containers",
    object_check=_check,
    # facets: yields only for its pods (labels are read, but nothing is yielded without a pod)
    fires_on=POD,
)
