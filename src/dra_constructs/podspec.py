"""Typed containers and claim references, rendered into a Pod spec that uses DRA claims.

Pure Python (no cdk8s): the workload constructs render through here, and so can users who build
pod templates for other tools (``render_pod_spec`` returns a plain dict).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import Field

from dra_constructs._api_fields import CONTAINER_FIELDS, POD_SPEC_FIELDS, fields_for
from dra_constructs.errors import DraConstructsError
from dra_constructs.requests import _Model
from dra_constructs.target import Target
from dra_constructs.validation import (
    Where,
    _where,
    check_dns_label,
    check_dns_subdomain,
    check_int,
    check_labels,
    check_quantity,
    check_unique,
    did_you_mean,
)

__all__ = ["ClaimUse", "Container", "PodClaim", "PreStop", "render_pod_spec"]

T = TypeVar("T")

DEFAULT_GRACE_SECONDS = 60
DEFAULT_PRE_STOP_SECONDS = 5


class ClaimUse(_Model):
    """A container's use of a pod claim (``resources.claims[]``), optionally one request of it.

    Get one from ``GpuClaimTemplate.use()``; it carries the template so the pod lists the claim.
    """

    claim: str = Field(description="Pod claim name (spec.resourceClaims[].name).")
    request: str | None = Field(default=None, description="Only this request's devices.")
    template_name: str | None = Field(default=None, description="ResourceClaimTemplate to create the claim from.")
    template_namespace: str | None = Field(default=None, description="The template's namespace, when known.")


class PodClaim(_Model):
    """An entry of ``spec.resourceClaims``: from a template (one claim per pod) or an existing claim."""

    name: str
    resource_claim_template_name: str | None = None
    resource_claim_name: str | None = None


class PreStop(_Model):
    """The ``preStop`` hook: the ``sleep`` action (no shell needed in the image) or a command."""

    sleep_seconds: int | None = DEFAULT_PRE_STOP_SECONDS
    command: tuple[str, ...] = ()

    def render(self) -> dict[str, Any]:
        """The lifecycle handler."""
        if self.command:
            return {"exec": {"command": list(self.command)}}
        return {"sleep": {"seconds": self.sleep_seconds}}

    def seconds(self) -> int:
        """Time the hook takes out of the grace period (0 for a command: unknown)."""
        return 0 if self.command else int(self.sleep_seconds or 0)


class Container(_Model):
    """A container of a GPU workload. ``claims`` gives it devices; never env vars or extended resources."""

    name: str
    image: str
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    claims: tuple[ClaimUse, ...] = ()
    requests: dict[str, str] = Field(default_factory=dict, description="e.g. {'cpu': '4', 'memory': '16Gi'}")
    limits: dict[str, str] = Field(default_factory=dict)
    ports: tuple[int, ...] = ()
    working_dir: str | None = None
    image_pull_policy: str | None = None
    volume_mounts: tuple[dict[str, Any], ...] = ()
    security_context: dict[str, Any] | None = None
    extra: dict[str, Any] = Field(default_factory=dict, description="Other container fields, as in the API.")


_TYPED_CONTAINER_FIELDS = {
    "name": "name", "image": "image", "command": "command", "args": "args", "env": "env",
    "resources": "requests/limits/claims", "ports": "ports", "workingDir": "working_dir",
    "imagePullPolicy": "image_pull_policy", "volumeMounts": "volume_mounts", "securityContext": "security_context",
    "lifecycle": "pre_stop",
}


def _render_container(container: Container, pre_stop: PreStop | None, where: Where,
                      target: Target | None = None) -> dict[str, Any]:
    field = f"containers[{container.name!r}]"
    check_dns_label(where, f"{field}.name", container.name)
    if not container.image.strip():
        raise DraConstructsError(_where(where), f"{field}.image", container.image, "empty image",
                                 "give an image reference, ideally pinned by digest")
    out: dict[str, Any] = {"name": container.name, "image": container.image}
    if container.command:
        out["command"] = list(container.command)
    if container.args:
        out["args"] = list(container.args)
    if container.env:
        out["env"] = [{"name": k, "value": v} for k, v in container.env.items()]
    resources: dict[str, Any] = {}
    for kind, values in (("requests", container.requests), ("limits", container.limits)):
        for key, value in values.items():
            check_quantity(where, f"{field}.{kind}[{key!r}]", value)
        if values:
            resources[kind] = dict(values)
    if container.claims:
        resources["claims"] = [
            {"name": use.claim, **({"request": use.request} if use.request else {})} for use in container.claims
        ]
    if resources:
        out["resources"] = resources
    if container.ports:
        for port in container.ports:
            if not 1 <= port <= 65535:
                raise DraConstructsError(_where(where), f"{field}.ports", port, "not a port number",
                                         "use a port between 1 and 65535")
        out["ports"] = [{"containerPort": p} for p in container.ports]
    if container.working_dir:
        out["workingDir"] = container.working_dir
    if container.image_pull_policy:
        if container.image_pull_policy not in ("Always", "IfNotPresent", "Never"):
            raise DraConstructsError(_where(where), f"{field}.image_pull_policy", container.image_pull_policy,
                                     "not a pull policy", "use 'Always', 'IfNotPresent' or 'Never'")
        out["imagePullPolicy"] = container.image_pull_policy
    if container.volume_mounts:
        for i, mount in enumerate(container.volume_mounts):
            if not isinstance(mount.get("name"), str) or not isinstance(mount.get("mountPath"), str):
                raise DraConstructsError(_where(where), f"{field}.volume_mounts[{i}]", mount,
                                         "a volume mount needs 'name' (a volume of the pod) and 'mountPath'",
                                         "use {'name': 'cache', 'mountPath': '/cache'}")
        out["volumeMounts"] = [dict(m) for m in container.volume_mounts]
    if container.security_context is not None:
        out["securityContext"] = dict(container.security_context)
    if pre_stop is not None:
        out["lifecycle"] = {"preStop": pre_stop.render()}
    extra = check_api_fields(where, f"{field}.extra", container.extra, CONTAINER_FIELDS, target,
                             {k: v for k, v in _TYPED_CONTAINER_FIELDS.items() if k in out})
    out.update(extra)
    return out


def pod_claims_for(containers: Sequence[Container], explicit: Sequence[PodClaim],
                   where: Where = "pod") -> list[PodClaim]:
    """Explicit pod claims plus one per template a container uses (deduplicated, in order)."""
    return pod_claims_from_uses([c.claims for c in containers], explicit, where)


def pod_claims_from_uses(uses: Iterable[Iterable[ClaimUse]], explicit: Sequence[PodClaim],
                         where: Where = "pod") -> list[PodClaim]:
    """Explicit pod claims plus one per template the claim uses name (deduplicated, in order).

    Two different claims under one name (two templates with the same id in two charts, ids such as
    ``LLM_Slice`` and ``llm-slice``, a template named like an explicit claim) are an error: the pod
    could list only one of them, and its containers would reference the name twice.
    """
    claims = list(explicit)
    known = {c.name: c for c in claims}
    for group in uses:
        for use in group:
            if use.template_name is None:
                continue
            same = known.get(use.claim)
            if same is None:
                claim = PodClaim(name=use.claim, resource_claim_template_name=use.template_name)
                claims.append(claim)
                known[use.claim] = claim
            elif same.resource_claim_template_name != use.template_name:
                other = (f"template {same.resource_claim_template_name!r}" if same.resource_claim_template_name
                         else f"ResourceClaim {same.resource_claim_name!r}")
                raise DraConstructsError(
                    _where(where), "claims", use.claim,
                    f"two claims share the pod claim name {use.claim!r}: {other} and template "
                    f"{use.template_name!r} (the pod can list the name once; the API server rejects the duplicate)",
                    "give one template its own claim_name= (GpuClaimTemplate(..., claim_name='...')) or a "
                    "construct id that makes a different DNS label",
                )
    return claims


def check_claim_references(where: Where, uses: Mapping[str, Sequence[ClaimUse]],
                           pod_claims: Sequence[PodClaim]) -> None:
    """Every pod claim is well formed and used; every container's claim names a pod claim."""
    check_unique(where, "claims[].name", (c.name for c in pod_claims),
                 "give every pod claim its own name (one per template or claim)")
    for claim in pod_claims:
        check_dns_label(where, "spec.resourceClaims[].name", claim.name)
        if (claim.resource_claim_name is None) == (claim.resource_claim_template_name is None):
            raise DraConstructsError(
                _where(where), f"claims[{claim.name!r}]", claim,
                "must specify exactly one of resource_claim_name, resource_claim_template_name",
                "reference a template (one claim per pod) or an existing ResourceClaim",
            )
        ref = claim.resource_claim_name or claim.resource_claim_template_name
        check_dns_subdomain(where, f"claims[{claim.name!r}]", ref)
    names = [c.name for c in pod_claims]
    used: set[str] = set()
    for container, container_uses in uses.items():
        listed: set[tuple[str, str | None]] = set()
        for use in container_uses:
            if (use.claim, use.request) in listed:
                raise DraConstructsError(
                    _where(where), f"containers[{container!r}].claims", use.claim + (f"/{use.request}"
                                                                                    if use.request else ""),
                    "listed twice in this container's resources.claims (the API server rejects the duplicate)",
                    "list each claim (or claim request) once per container",
                )
            listed.add((use.claim, use.request))
            if use.claim not in names:
                raise DraConstructsError(
                    _where(where), f"containers[{container!r}].claims", use.claim,
                    "must be one of the names in pod.spec.resourceClaims" + (f" {names}" if names else " (empty)"),
                    "use claims=[template.use()] or add a PodClaim of that name",
                )
            if use.request is not None:  # "<request>" or "<request>/<alternative>" (firstAvailable)
                for part in use.request.split("/", 1):
                    check_dns_label(where, f"containers[{container!r}].claims[].request", part)
            used.add(use.claim)
    for name in names:
        if name not in used:
            raise DraConstructsError(
                _where(where), "claims", name, "no container uses this pod claim (devices would idle)",
                "add template.use() to a container's claims, or drop the claim",
            )


def check_claim_namespaces(where: Where, uses: Mapping[str, Sequence[ClaimUse]], namespace: str | None) -> None:
    """Every template a container uses lives in the pod's namespace (when both are known).

    Templates are namespaced and a pod can only use those of its own namespace: one of another
    namespace (another tenant's included) leaves the pod Pending.
    """
    if not namespace:
        return
    for container, container_uses in uses.items():
        for use in container_uses:
            if use.template_namespace and use.template_namespace != namespace:
                raise DraConstructsError(
                    _where(where), f"containers[{container!r}].claims", use.template_name,
                    f"ResourceClaimTemplate {use.template_namespace}/{use.template_name} is in namespace "
                    f"{use.template_namespace!r}, this pod in {namespace!r}: a pod can only use templates of its "
                    "own namespace (the pod would stay Pending)",
                    f"create the template in namespace {namespace!r} (a chart with that namespace, or "
                    f"namespace={namespace!r}), or put the workload in {use.template_namespace!r}",
                )


def render_pod_claims(pod_claims: Sequence[PodClaim]) -> list[dict[str, Any]]:
    """``spec.resourceClaims``."""
    return [
        {"name": c.name, **({"resourceClaimTemplateName": c.resource_claim_template_name}
                            if c.resource_claim_template_name else {"resourceClaimName": c.resource_claim_name})}
        for c in pod_claims
    ]


def render_claim_uses(uses: Sequence[ClaimUse]) -> list[dict[str, Any]]:
    """A container's ``resources.claims``."""
    return [{"name": use.claim, **({"request": use.request} if use.request else {})} for use in uses]


def items_of(where: Where, field: str, value: Any, kind: type[T], example: str) -> list[T]:
    """``value`` as a list of ``kind``: a list or tuple of them (a single one or a dict is an error)."""
    if isinstance(value, (kind, str, bytes, Mapping)) or not isinstance(value, Iterable):
        got = type(value).__name__
        hint = f"wrap it in a list: {field}=[{example}]" if isinstance(value, kind) else \
            f"pass a list of {kind.__name__}: {field}=[{example}]"
        if isinstance(value, Mapping) and kind is not dict:
            hint += f" ({kind.__name__}(**d) converts a dict)"
        raise DraConstructsError(_where(where), field, value, f"must be a list of {kind.__name__}, not a {got}", hint)
    items = list(value)
    for i, item in enumerate(items):
        if not isinstance(item, kind):
            hint = f"use {example}" + (f" ({kind.__name__}(**d) converts a dict)" if isinstance(item, Mapping) else "")
            raise DraConstructsError(_where(where), f"{field}[{i}]", item,
                                     f"must be a {kind.__name__}, not a {type(item).__name__}", hint)
    return items


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "array": (list, tuple), "object": (dict, Mapping), "string": (str,), "integer": (int,), "boolean": (bool,),
}


def check_api_fields(where: Where, field: str, extra: Any, table: Mapping[str, tuple[str, int, int]],
                     target: Target | None, typed: Mapping[str, str]) -> dict[str, Any]:
    """``extra``/``extra_spec``: known field names (of the target) with the right JSON types.

    ``typed`` maps API fields that have a typed argument to that argument's name.
    """
    if extra is None:
        return {}
    if not isinstance(extra, Mapping):
        raise DraConstructsError(_where(where), field, extra, f"must be a mapping of API fields, not "
                                 f"{type(extra).__name__}", f"pass {field}={{'fieldName': value}} (camelCase)")
    minor = (target or Target()).minor
    known = fields_for(dict(table), minor)
    for key, value in extra.items():
        if key in typed:
            raise DraConstructsError(_where(where), field, key, "duplicates a typed field",
                                     f"set {key} through its typed argument {typed[key]}=")
        if key in _MISPLACED:
            raise DraConstructsError(_where(where), f"{field}[{key!r}]", value, _MISPLACED[key][0], _MISPLACED[key][1])
        if key not in known:
            exists = key in table
            problem = (f"not a field in Kubernetes {minor and f'1.{minor}'}" if exists
                       else "not a field of this API object" + did_you_mean(key, known))
            raise DraConstructsError(_where(where), f"{field}[{key!r}]", value, problem,
                                     "use the API's camelCase field names (kubectl explain pod.spec)")
        expected = known[key]
        ok = isinstance(value, _JSON_TYPES[expected]) and not (expected == "integer" and isinstance(value, bool))
        if expected == "string" and isinstance(value, str) and not value:
            ok = True
        if not ok:
            raise DraConstructsError(_where(where), f"{field}[{key!r}]", value,
                                     f"must be a JSON {expected}, not {type(value).__name__}",
                                     f"give {key} as the API expects it (kubectl explain)")
    return dict(extra)


#: Fields users put in the wrong object: field -> (problem, fix).
_MISPLACED: dict[str, tuple[str, str]] = {
    "volumeClaimTemplates": ("a StatefulSet field, not a Pod spec field",
                             "use GpuStatefulSet(volume_claim_templates=[VolumeClaimTemplate(...)])"),
    "replicas": ("a workload field, not a Pod spec field", "use GpuDeployment/GpuStatefulSet(replicas=...)"),
    "strategy": ("a Deployment field, not a Pod spec field", "use GpuDeployment(strategy=...)"),
    "template": ("a workload field, not a Pod spec field", "use the workload's typed options"),
    "backoffLimit": ("a Job field, not a Pod spec field", "use GpuJob(backoff_limit=...)"),
    "podFailurePolicy": ("a Job field, not a Pod spec field", "use GpuJob(pod_failure_policy=...)"),
}


def _check_volume_references(where: Where, spec: Mapping[str, Any], claim_template_volumes: Iterable[str]) -> None:
    """Every volumeMount / volumeDevice names a volume of the pod (or a StatefulSet claim template)."""
    volumes = {v.get("name") for v in spec.get("volumes") or () if isinstance(v, Mapping)}
    volumes |= set(claim_template_volumes)
    for group in ("initContainers", "containers"):
        for container in spec.get(group) or ():
            for key in ("volumeMounts", "volumeDevices"):
                for mount in container.get(key) or ():
                    name = mount.get("name") if isinstance(mount, Mapping) else None
                    if name not in volumes:
                        raise DraConstructsError(
                            _where(where), f"containers[{container.get('name')!r}].{key}", mount,
                            f"names no volume of the pod{did_you_mean(str(name), (v for v in volumes if v))} "
                            f"(volumes: {sorted(v for v in volumes if v) or 'none'})",
                            "add the volume with volumes=[{'name': ..., ...}] or fix the mount's name",
                        )


_TYPED_POD_FIELDS = {
    "containers": "containers", "initContainers": "init_containers", "resourceClaims": "claims",
    "terminationGracePeriodSeconds": "termination_grace_period_seconds", "restartPolicy": "restart_policy",
    "nodeSelector": "node_selector", "tolerations": "tolerations", "serviceAccountName": "service_account_name",
    "volumes": "volumes", "priorityClassName": "priority_class_name",
}


def render_pod_spec(
    containers: Sequence[Container],
    *,
    claims: Sequence[PodClaim] = (),
    termination_grace_period_seconds: int = DEFAULT_GRACE_SECONDS,
    pre_stop: PreStop | None = None,
    restart_policy: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    service_account_name: str | None = None,
    init_containers: Sequence[Container] = (),
    volumes: Sequence[Mapping[str, Any]] = (),
    priority_class_name: str | None = None,
    extra_spec: Mapping[str, Any] | None = None,
    kubernetes_version: str | Target | None = None,
    where: Where = "pod",
    claim_template_volumes: Sequence[str] = (),
) -> dict[str, Any]:
    """A Pod spec whose containers reference DRA claims, with a grace path for preemption.

    Lists may be given as lists or tuples. ``extra_spec`` holds other PodSpec fields (camelCase);
    their names and JSON types are checked against ``kubernetes_version`` (default 1.32), and every
    ``volumeMounts[].name`` must name a volume (or one of ``claim_template_volumes``, the
    ``volumeClaimTemplates`` of a StatefulSet the spec is for).
    """
    # (a Target as is: the construct path costs a jsii round trip, so it is built only for errors)
    target = kubernetes_version if isinstance(kubernetes_version, Target) or kubernetes_version is None \
        else Target.parse(kubernetes_version, _where(where))
    containers = items_of(where, "containers", containers, Container, "Container(name=..., image=...)")
    init_containers = items_of(where, "init_containers", init_containers, Container, "Container(name=..., image=...)")
    claims = items_of(where, "claims", claims, PodClaim, "PodClaim(name=..., resource_claim_name=...)")
    if not containers:
        raise DraConstructsError(_where(where), "containers", [], "a pod needs at least one container",
                                 "pass containers=[Container(name=..., image=...)]")
    if pre_stop is not None and not isinstance(pre_stop, PreStop):
        raise DraConstructsError(_where(where), "pre_stop", pre_stop, f"must be a PreStop, not "
                                 f"{type(pre_stop).__name__}", "use pre_stop=PreStop(sleep_seconds=...)")
    pre_stop = pre_stop if pre_stop is not None else PreStop()
    if not pre_stop.command:
        check_int(where, "pre_stop.sleep_seconds", pre_stop.sleep_seconds, 0)
    if isinstance(termination_grace_period_seconds, int) and not isinstance(termination_grace_period_seconds, bool) \
            and termination_grace_period_seconds < 1:
        raise DraConstructsError(
            _where(where), "termination_grace_period_seconds", termination_grace_period_seconds,
            "GPU workloads need a grace period to checkpoint and release devices when preempted",
            f"use at least the preStop time plus the time to exit cleanly (default {DEFAULT_GRACE_SECONDS})",
        )
    check_int(where, "termination_grace_period_seconds", termination_grace_period_seconds, 1)
    if pre_stop.seconds() >= termination_grace_period_seconds:
        raise DraConstructsError(
            _where(where), "pre_stop.sleep_seconds", pre_stop.seconds(),
            f"the preStop hook uses the whole grace period ({termination_grace_period_seconds}s), "
            "leaving no time after SIGTERM", "make the grace period longer than the preStop sleep",
        )
    tolerations = items_of(where, "tolerations", tolerations, Mapping,  # type: ignore[type-abstract]
                           "{'key': 'nvidia.com/gpu', 'operator': 'Exists', 'effect': 'NoSchedule'}")
    volumes = items_of(where, "volumes", volumes, Mapping,  # type: ignore[type-abstract]
                       "{'name': 'cache', 'emptyDir': {}}")
    all_containers = [*init_containers, *containers]
    check_unique(where, "containers[].name", (c.name for c in all_containers),
                 "give every container of the pod its own name")
    pod_claims = pod_claims_for(all_containers, claims, where)
    check_claim_references(where, {c.name: c.claims for c in all_containers}, pod_claims)
    spec: dict[str, Any] = {}
    if init_containers:
        spec["initContainers"] = [_render_container(c, None, where, target) for c in init_containers]
    spec["containers"] = [_render_container(c, pre_stop, where, target) for c in containers]
    if pod_claims:
        spec["resourceClaims"] = render_pod_claims(pod_claims)
    spec["terminationGracePeriodSeconds"] = termination_grace_period_seconds
    if restart_policy is not None:
        if restart_policy not in ("Always", "OnFailure", "Never"):
            raise DraConstructsError(_where(where), "restart_policy", restart_policy, "not a restart policy",
                                     "use 'Always', 'OnFailure' or 'Never' (Jobs: 'OnFailure' or 'Never')")
        spec["restartPolicy"] = restart_policy
    if node_selector is not None:
        if not isinstance(node_selector, Mapping):
            raise DraConstructsError(
                _where(where), "node_selector", node_selector,
                f"must be a mapping of node label keys to values, not {type(node_selector).__name__}",
                "pass node_selector={'nvidia.com/gpu.present': 'true'}")
        if node_selector:
            spec["nodeSelector"] = check_labels(where, "node_selector", node_selector)
    if tolerations:
        for i, toleration in enumerate(tolerations):
            _check_toleration(where, f"tolerations[{i}]", toleration)
        spec["tolerations"] = [dict(t) for t in tolerations]
    if service_account_name is not None:
        check_dns_subdomain(where, "service_account_name", service_account_name)
        spec["serviceAccountName"] = service_account_name
    if priority_class_name is not None:
        check_dns_subdomain(where, "priority_class_name", priority_class_name)
        spec["priorityClassName"] = priority_class_name
    if volumes:
        check_unique(where, "volumes[].name", (str(v.get("name")) for v in volumes), "give every volume its own name")
        for i, volume in enumerate(volumes):
            check_dns_label(where, f"volumes[{i}].name", volume.get("name"))
        spec["volumes"] = [dict(v) for v in volumes]
    typed = {k: v for k, v in _TYPED_POD_FIELDS.items() if k in spec or k in ("containers", "resourceClaims")}
    for key, value in check_api_fields(where, "extra_spec", extra_spec, POD_SPEC_FIELDS, target, typed).items():
        spec[key] = value
    _check_volume_references(where, spec, claim_template_volumes)
    return spec


_TOLERATION_KEYS = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})


def _check_toleration(where: Where, field: str, toleration: Mapping[str, Any]) -> None:
    for key in toleration:
        if key not in _TOLERATION_KEYS:
            raise DraConstructsError(_where(where), f"{field}[{key!r}]", toleration[key],
                                     "not a toleration field" + did_you_mean(str(key), _TOLERATION_KEYS),
                                     f"use {sorted(_TOLERATION_KEYS)}")
    if toleration.get("operator", "Equal") not in ("Equal", "Exists"):
        raise DraConstructsError(_where(where), f"{field}.operator", toleration.get("operator"),
                                 "not a toleration operator", "use 'Equal' or 'Exists'")
    if toleration.get("effect") not in (None, "", "NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise DraConstructsError(_where(where), f"{field}.effect", toleration.get("effect"), "not a taint effect",
                                 "use 'NoSchedule', 'PreferNoSchedule' or 'NoExecute'")
