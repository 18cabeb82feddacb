"""DRA020: no DRA-allocated GPU under a gVisor sandbox (nvproxy exposes every host GPU).

gVisor's nvproxy does not scope GPUs allocated through DRA and CDI (google/gvisor#13620): bare
``runsc --nvproxy`` hands the sandbox every GPU of the node whatever the claim allocated, and with
the NVIDIA CDI wrapper (which applies the allocation) the sandbox does not start. runc scopes the same
allocation correctly. So a pod whose ``runtimeClassName`` is gVisor (named ``gvisor``/``runsc``, or a
RuntimeClass in the set whose ``handler`` is) must not get GPUs through DRA: a GPU ResourceClaim
(or one whose template/claim is not in the set: it may be a GPU), or an extended resource the target
serves from a GPU DeviceClass (KEP-5004). Device-plugin GPU resources are DRA001's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.facets import POD
from dra_constructs.guardrails.manifest import Manifest, PodView, as_dict, field_path
from dra_constructs.guardrails.model import Hit, Rule, Severity

__all__ = ["GVISOR_NAME", "RULE", "is_gvisor"]

#: RuntimeClass names and handlers of gVisor: ``runsc`` (containerd's runtime), ``gvisor`` (GKE Sandbox),
#: and variants such as ``runsc-nvproxy`` / ``gvisor.debug``.
GVISOR_NAME = re.compile(r"^(runsc|gvisor)([-_.].*)?$", re.IGNORECASE)


def is_gvisor(ctx: AuditContext, runtime_class: str) -> bool:
    """Whether RuntimeClass ``runtime_class`` runs pods in gVisor (by its name or its handler in the set)."""
    handler = ctx.runtime_class_handlers.get(runtime_class, "")
    return bool(GVISOR_NAME.match(runtime_class) or GVISOR_NAME.match(handler))


def _dra_gpus(ctx: AuditContext, m: Manifest, pod: PodView) -> list[str]:
    """What gives the pod GPUs through DRA: GPU claims and DRA-served GPU extended resources."""
    found = []
    for _, entry in pod.claims():
        source = ctx.claim_source(m, entry)
        if source is None or ctx.claim_is_gpu(source):
            found.append(f"claim {entry.get('name')!r}" + ("" if source is not None else " (not in the set)"))
    for _, container in pod.containers():
        resources = as_dict(container.get("resources"))
        names = {n for section in ("requests", "limits") for n in as_dict(resources.get(section))
                 if isinstance(n, str)}
        for name in sorted(names):
            mapped = ctx.dra_extended_resource(name)
            if mapped is not None and ctx.is_gpu_class(mapped[0]):
                found.append(f"container {container.get('name')!r} resource {name!r} (DRA class {mapped[0]!r})")
    return found


def _check(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    for pod in m.pods:
        runtime_class = pod.spec.get("runtimeClassName")
        if not isinstance(runtime_class, str) or not is_gvisor(ctx, runtime_class):
            continue
        gpus = _dra_gpus(ctx, m, pod)
        if gpus:
            handler = ctx.runtime_class_handlers.get(runtime_class)
            runs = f" (handler {handler!r})" if handler else ""
            yield Hit(field_path(pod.path, "runtimeClassName"),
                      f"runtimeClassName {runtime_class!r}{runs} runs the pod in gVisor, whose nvproxy does not scope "
                      f"DRA-allocated GPUs (google/gvisor#13620): the sandbox sees every GPU of the node, not only "
                      f"its allocation ({', '.join(gpus)})")


RULE = Rule(
    id="DRA020",
    name="no-dra-gpus-under-gvisor",
    severity=Severity.ERROR,
    why="gVisor's nvproxy ignores the DRA allocation and exposes every host GPU to the sandbox, other tenants' "
        "GPUs included (google/gvisor#13620)",
    fix="run GPU pods with runc (drop the gVisor runtimeClassName, or use the nvidia RuntimeClass) and keep "
        "gVisor for pods without GPUs; if the node has a single GPU, suppress DRA020 on the pod with a reason",
    object_check=_check,
    # facets: reads its pods' runtimeClassName, claims and containers only
    fires_on=POD,
)
