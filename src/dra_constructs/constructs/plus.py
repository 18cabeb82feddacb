"""DRA claims on cdk8s-plus-28 workloads: :func:`attach_claims`.

cdk8s-plus-28 renders every workload through its 1.28 L1 class (``KubeDeployment``...), whose
``toJson()`` copies only the fields the 1.28 schema knows, so ``resourceClaimTemplateName`` and
``resources.claims[].request`` vanish even from JSON patches (docs/cdk8s-plus.md). What survives:
replacing that L1 child. :func:`attach_claims` removes the workload's ``Resource`` child and puts a
``cdk8s.ApiObject`` subclass under the same id (so the same name and path) whose ``to_json`` (a
jsii override: cdk8s calls it at synth) takes the original child's rendering, everything
cdk8s-plus produced, and adds ``spec.resourceClaims`` and each container's ``resources.claims``.
The result is an ordinary object of the chart: synthesized, schema-valid, checked by the guardrails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import cdk8s
import constructs

from dra_constructs.constructs.guardrails import guard
from dra_constructs.errors import DraConstructsError
from dra_constructs.podspec import (
    ClaimUse,
    PodClaim,
    check_claim_namespaces,
    check_claim_references,
    items_of,
    pod_claims_from_uses,
    render_claim_uses,
    render_pod_claims,
)
from dra_constructs.validation import check_dns_subdomain

if TYPE_CHECKING:
    from dra_constructs.constructs.claims import GpuClaimTemplate

__all__ = ["attach_claims"]

#: kind -> path of the pod spec inside the object.
_POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}

ClaimsArg = Mapping[str, "Sequence[ClaimUse | GpuClaimTemplate] | ClaimUse | GpuClaimTemplate"]


class _ClaimsCarrier(cdk8s.ApiObject):
    """Stands in for a cdk8s-plus workload's L1 child: its rendering plus the DRA fields."""

    def __init__(self, scope: constructs.Construct, original: cdk8s.ApiObject) -> None:
        super().__init__(scope, original.node.id, api_version=original.api_version, kind=original.kind,
                         metadata={"name": original.name})
        self._original = original
        self._uses: dict[str, list[ClaimUse]] = {}
        self._pod_claims: list[PodClaim] = []
        self._patches: list[cdk8s.JsonPatch] = []

    def add_json_patch(self, *ops: cdk8s.JsonPatch) -> None:
        """Patches apply to the final document (no 1.28 schema filter here)."""
        self._patches.extend(ops)

    def render_claims(self, doc: dict[str, Any]) -> dict[str, Any]:
        """``doc`` (the original rendering) with the claims, this object's metadata and patches."""
        spec: Any = doc
        for key in _POD_SPEC_PATHS[self.kind]:
            spec = spec.setdefault(key, {})
        pod_claims = pod_claims_from_uses(self._uses.values(), self._pod_claims)
        ours = render_pod_claims(pod_claims)
        names = {c["name"] for c in ours}
        # A claim cdk8s-plus kept half of (a JSON patch filtered to ``{name}``) is replaced by ours.
        kept = [c for c in spec.get("resourceClaims") or () if c.get("name") not in names]
        spec["resourceClaims"] = kept + ours
        for group in ("initContainers", "containers"):
            for container in spec.get(group) or ():
                uses = self._uses.get(container.get("name"))
                if uses:
                    resources = container.setdefault("resources", {})
                    refs = [r for r in resources.get("claims") or () if r.get("name") not in {u.claim for u in uses}]
                    resources["claims"] = refs + render_claim_uses(uses)
        own = self.metadata.to_json() or {}
        metadata = doc.setdefault("metadata", {})
        for key in ("labels", "annotations"):
            if own.get(key):
                metadata[key] = {**(metadata.get(key) or {}), **own[key]}
        if self._patches:
            doc = cast(dict[str, Any], cdk8s.JsonPatch.apply(doc, *self._patches))
        return doc

    def to_json(self) -> Any:
        """Called by cdk8s at synth (jsii override)."""
        return self.render_claims(dict(self._original.to_json()))


def _claim_uses(where: str, container: str, value: Any) -> list[ClaimUse]:
    from dra_constructs.constructs.claims import GpuClaimTemplate

    if isinstance(value, (ClaimUse, GpuClaimTemplate)):
        value = [value]
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
        raise DraConstructsError(where, f"claims[{container!r}]", value,
                                 f"must be a list of claim uses, not a {type(value).__name__}",
                                 "use [template.use()] (ClaimUse(**d) converts a dict)")
    items = list(value)
    uses = []
    for i, item in enumerate(items):
        if isinstance(item, GpuClaimTemplate):
            item = item.use()
        if not isinstance(item, ClaimUse):
            raise DraConstructsError(where, f"claims[{container!r}][{i}]", item,
                                     f"must be a ClaimUse or a GpuClaimTemplate, not a {type(item).__name__}",
                                     "use template.use() (all of the claim) or template.use('request')"
                                     + (" (ClaimUse(**d) converts a dict)" if isinstance(item, Mapping) else ""))
        uses.append(item)
    return uses


def _container_names(workload: constructs.Construct, where: str) -> list[str]:
    names = []
    for attr in ("init_containers", "containers"):
        for container in getattr(workload, attr, None) or ():
            names.append(getattr(container, "name", None))
    return [n for n in names if isinstance(n, str)]


def attach_claims(
    workload: constructs.Construct,
    claims: ClaimsArg,
    *,
    pod_claims: Sequence[PodClaim] = (),
) -> cdk8s.ApiObject:
    """Give containers of a cdk8s-plus-28 workload DRA claims (Pod, Deployment, StatefulSet, Job,
    CronJob, DaemonSet).

    :param workload: the cdk8s-plus workload; add its containers before calling this.
    :param claims: container name -> ``template.use()`` (or the template itself, or a list of them).
    :param pod_claims: extra pod claims, e.g. ``PodClaim(name=..., resource_claim_name=...)`` for a
        shared ``ResourceClaim`` that a container references with ``ClaimUse(claim=...)``.
    :returns: the object that now renders the workload (``cdk8s.ApiObject.of(workload)`` returns it
        too); its ``metadata`` and ``add_json_patch`` apply to the final document.

    Call it again to add more claims. Everything is checked here: unknown containers, claims no
    container uses, names that are not DNS labels.
    """
    where = workload.node.path or "App"
    try:
        current = cdk8s.ApiObject.of(workload)
    except RuntimeError:
        current = None
    if current is None or current.kind not in _POD_SPEC_PATHS or not hasattr(workload, "containers"):
        raise DraConstructsError(
            where, "workload", type(workload).__name__, "not a cdk8s-plus workload with a pod spec",
            "pass a cdk8s_plus_28 Pod, Deployment, StatefulSet, Job, CronJob or DaemonSet "
            "(dra-constructs' own GpuPod/GpuDeployment/... take claims through Container(claims=...))",
        )
    if not isinstance(claims, Mapping):
        raise DraConstructsError(where, "claims", claims, f"must map container names to claim uses, not "
                                 f"{type(claims).__name__}", "pass {'container-name': [template.use()]}")
    try:
        check_dns_subdomain(where, "metadata.name", current.name)
    except DraConstructsError:
        raise DraConstructsError(
            where, "metadata.name", current.name,
            "not a DNS-1123 name: cdk8s keeps '_' and '.' of construct ids in generated names, and the API "
            "server rejects them", "use a construct id of letters, digits and '-', or pass "
            "metadata=cdk8s.ApiObjectMetadata(name='...') to the workload",
        ) from None
    pod_claims = items_of(where, "pod_claims", pod_claims, PodClaim, "PodClaim(name=..., resource_claim_name=...)")
    names = _container_names(workload, where)
    new_uses: dict[str, list[ClaimUse]] = {}
    for container, value in claims.items():
        if container not in names:
            raise DraConstructsError(where, "claims", container, f"no container of that name in this "
                                     f"{current.kind} (containers: {names or 'none'})",
                                     "name one of its containers (ContainerProps(name=...)); add containers first")
        new_uses[container] = _claim_uses(where, container, value)
    carrier = current if isinstance(current, _ClaimsCarrier) else None
    merged = {k: list(v) for k, v in (carrier._uses if carrier else {}).items()}
    for container, uses in new_uses.items():
        merged.setdefault(container, []).extend(u for u in uses if u not in merged.get(container, []))
    all_pod_claims = [*(carrier._pod_claims if carrier else ()), *pod_claims]
    check_claim_references(where, merged, pod_claims_from_uses(merged.values(), all_pod_claims, where))
    if any(use.template_namespace for uses in new_uses.values() for use in uses):
        check_claim_namespaces(where, new_uses, current.metadata.namespace)
    if carrier is None:
        workload.node.try_remove_child(current.node.id)
        carrier = _ClaimsCarrier(workload, current)
        guard(workload)
    carrier._uses = merged
    carrier._pod_claims = all_pod_claims
    return carrier
