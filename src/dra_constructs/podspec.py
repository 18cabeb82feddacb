"""Typed containers and claim references, rendered into a Pod spec that uses DRA claims.

Pure Python (no cdk8s): the workload constructs render through here, and so can users who build
pod templates for other tools (``render_pod_spec`` returns a plain dict).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from .errors import DraConstructsError
from .requests import _Model
from .validation import (
    Where,
    _where,
    check_dns_label,
    check_dns_subdomain,
    check_labels,
    check_quantity,
    check_unique,
)

__all__ = ["ClaimUse", "Container", "PodClaim", "PreStop", "render_pod_spec"]

DEFAULT_GRACE_SECONDS = 60
DEFAULT_PRE_STOP_SECONDS = 5


class ClaimUse(_Model):
    """A container's use of a pod claim (``resources.claims[]``), optionally one request of it.

    Get one from ``GpuClaimTemplate.use()``; it carries the template so the pod lists the claim.
    """

    claim: str = Field(description="Pod claim name (spec.resourceClaims[].name).")
    request: str | None = Field(default=None, description="Only this request's devices.")
    template_name: str | None = Field(default=None, description="ResourceClaimTemplate to create the claim from.")


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


def _render_container(container: Container, pre_stop: PreStop | None, where: Where) -> dict[str, Any]:
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
        out["volumeMounts"] = [dict(m) for m in container.volume_mounts]
    if container.security_context is not None:
        out["securityContext"] = dict(container.security_context)
    if pre_stop is not None:
        out["lifecycle"] = {"preStop": pre_stop.render()}
    for key, value in container.extra.items():
        if key in out:
            raise DraConstructsError(_where(where), f"{field}.extra", key, "duplicates a typed field",
                                     f"set {key} through its typed argument")
        out[key] = value
    return out


def pod_claims_for(containers: Sequence[Container], explicit: Sequence[PodClaim]) -> list[PodClaim]:
    """Explicit pod claims plus one per template a container uses (deduplicated, in order)."""
    claims = list(explicit)
    known = {c.name for c in claims}
    for container in containers:
        for use in container.claims:
            if use.claim not in known and use.template_name is not None:
                claims.append(PodClaim(name=use.claim, resource_claim_template_name=use.template_name))
                known.add(use.claim)
    return claims


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
    extra_spec: Mapping[str, Any] | None = None,
    where: Where = "pod",
) -> dict[str, Any]:
    """A Pod spec whose containers reference DRA claims, with a grace path for preemption."""
    if not containers:
        raise DraConstructsError(_where(where), "containers", [], "a pod needs at least one container",
                                 "pass containers=[Container(name=..., image=...)]")
    pre_stop = pre_stop if pre_stop is not None else PreStop()
    if termination_grace_period_seconds < 1:
        raise DraConstructsError(
            _where(where), "termination_grace_period_seconds", termination_grace_period_seconds,
            "GPU workloads need a grace period to checkpoint and release devices when preempted",
            f"use at least the preStop time plus the time to exit cleanly (default {DEFAULT_GRACE_SECONDS})",
        )
    if pre_stop.seconds() >= termination_grace_period_seconds:
        raise DraConstructsError(
            _where(where), "pre_stop.sleep_seconds", pre_stop.seconds(),
            f"the preStop hook uses the whole grace period ({termination_grace_period_seconds}s), "
            "leaving no time after SIGTERM", "make the grace period longer than the preStop sleep",
        )
    all_containers = [*init_containers, *containers]
    check_unique(where, "containers[].name", (c.name for c in all_containers),
                 "give every container of the pod its own name")
    pod_claims = pod_claims_for(all_containers, claims)
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
    for container in all_containers:
        for use in container.claims:
            if use.claim not in names:
                raise DraConstructsError(
                    _where(where), f"containers[{container.name!r}].claims", use.claim,
                    "must be one of the names in pod.spec.resourceClaims" + (f" {names}" if names else " (empty)"),
                    "use claims=[template.use()] or add a PodClaim of that name",
                )
            if use.request is not None:  # "<request>" or "<request>/<alternative>" (firstAvailable)
                for part in use.request.split("/", 1):
                    check_dns_label(where, f"containers[{container.name!r}].claims[].request", part)
            used.add(use.claim)
    for name in names:
        if name not in used:
            raise DraConstructsError(
                _where(where), "claims", name, "no container uses this pod claim (devices would idle)",
                "add template.use() to a container's claims, or drop the claim",
            )
    spec: dict[str, Any] = {}
    if init_containers:
        spec["initContainers"] = [_render_container(c, None, where) for c in init_containers]
    spec["containers"] = [_render_container(c, pre_stop, where) for c in containers]
    if pod_claims:
        spec["resourceClaims"] = [
            {"name": c.name, **({"resourceClaimTemplateName": c.resource_claim_template_name}
                                if c.resource_claim_template_name else {"resourceClaimName": c.resource_claim_name})}
            for c in pod_claims
        ]
    spec["terminationGracePeriodSeconds"] = termination_grace_period_seconds
    if restart_policy is not None:
        if restart_policy not in ("Always", "OnFailure", "Never"):
            raise DraConstructsError(_where(where), "restart_policy", restart_policy, "not a restart policy",
                                     "use 'Always', 'OnFailure' or 'Never' (Jobs: 'OnFailure' or 'Never')")
        spec["restartPolicy"] = restart_policy
    if node_selector:
        spec["nodeSelector"] = check_labels(where, "node_selector", node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if service_account_name is not None:
        check_dns_subdomain(where, "service_account_name", service_account_name)
        spec["serviceAccountName"] = service_account_name
    for key, value in (extra_spec or {}).items():
        if key in spec:
            raise DraConstructsError(_where(where), "extra_spec", key, "duplicates a typed field",
                                     f"set {key} through its typed argument")
        spec[key] = value
    return spec
