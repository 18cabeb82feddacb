"""Pods and pod-template workloads (Deployment, Job, StatefulSet) whose containers use DRA claims.

cdk8s-plus-28 cannot express these: its 1.28 schema filters ``resourceClaimTemplateName`` and
``resources.claims[].request`` out of its objects, even from JSON patches (docs/cdk8s-plus.md).
These constructs are ``cdk8s.ApiObject`` subclasses built with one JSON patch, which is also
the cheapest route through jsii.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import cdk8s
import constructs

from ._scope import guard, lazy_path
from .errors import DraConstructsError
from .podspec import DEFAULT_GRACE_SECONDS, Container, PodClaim, PreStop, render_pod_spec
from .validation import Where, _where, check_dns_label, check_labels, object_metadata

__all__ = ["GpuDeployment", "GpuJob", "GpuPod", "GpuStatefulSet", "PodOptions"]


class PodOptions:
    """Pod-level settings shared by every workload construct (keyword arguments).

    :param containers: the containers; their ``claims`` reference claim templates (``template.use()``).
    :param claims: extra pod claims (e.g. an existing ``ResourceClaim`` by name). Default: derived.
    :param termination_grace_period_seconds: default 60: time to checkpoint after SIGTERM on preemption.
    :param pre_stop: preStop hook of every container. Default: ``PreStop()`` (sleep 5 s).
    :param node_selector / tolerations / service_account_name / init_containers: as in the Pod API.
    :param extra_spec: other Pod spec fields, as in the API (camelCase).
    """


_POD_OPTIONS = frozenset({
    "containers", "claims", "termination_grace_period_seconds", "pre_stop", "restart_policy",
    "node_selector", "tolerations", "service_account_name", "init_containers", "extra_spec",
})


def _pod_spec(where: Where, pod: Mapping[str, Any], restart_policy: str | None) -> dict[str, Any]:
    unknown = sorted(set(pod) - _POD_OPTIONS)
    if unknown:
        raise DraConstructsError(
            _where(where), unknown[0], pod[unknown[0]], "not a pod option of this workload",
            f"use one of {sorted(_POD_OPTIONS)}, or extra_spec={{...}} for other Pod spec fields",
        )
    options = {"restart_policy": restart_policy, **pod}  # the keys are render_pod_spec's parameters
    return render_pod_spec(options.pop("containers"), **options, where=where)


class GpuPod(cdk8s.ApiObject):
    """A Pod whose containers use DRA claims, with a grace path for preemption (see ``PodOptions``)."""

    def __init__(
        self,
        scope: constructs.Construct,
        id: str,
        *,
        containers: Sequence[Container],
        claims: Sequence[PodClaim] = (),
        termination_grace_period_seconds: int = DEFAULT_GRACE_SECONDS,
        pre_stop: PreStop | None = None,
        restart_policy: str | None = None,
        node_selector: Mapping[str, str] | None = None,
        tolerations: Sequence[Mapping[str, Any]] = (),
        service_account_name: str | None = None,
        init_containers: Sequence[Container] = (),
        extra_spec: Mapping[str, Any] | None = None,
        name: str | None = None,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        where = lazy_path(scope, id)
        spec = render_pod_spec(
            containers, claims=claims, termination_grace_period_seconds=termination_grace_period_seconds,
            pre_stop=pre_stop, restart_policy=restart_policy, node_selector=node_selector,
            tolerations=tolerations, service_account_name=service_account_name,
            init_containers=init_containers, extra_spec=extra_spec, where=where,
        )
        metadata = object_metadata(where, name, namespace, labels, annotations)
        super().__init__(scope, id, api_version="v1", kind="Pod", metadata=metadata)
        guard(scope)
        self.add_json_patch(cdk8s.JsonPatch.add("/spec", spec))


class _TemplatedWorkload(cdk8s.ApiObject):
    """A workload with ``spec.template`` (a pod template) and a label selector derived from its name."""

    _api_version = "apps/v1"
    _kind = ""
    _restart_policy: str | None = None
    _restart_policies: tuple[str, ...] = ("Always",)

    def __init__(
        self,
        scope: constructs.Construct,
        id: str,
        *,
        workload_spec: Mapping[str, Any],
        pod: Mapping[str, Any],
        selector: bool,
        name: str | None,
        namespace: str | None,
        labels: Mapping[str, str] | None,
        annotations: Mapping[str, str] | None,
        pod_labels: Mapping[str, str] | None,
    ) -> None:
        where = lazy_path(scope, id)
        pod_spec = _pod_spec(where, pod, self._restart_policy)
        if pod_spec.get("restartPolicy", "Always") not in self._restart_policies:
            raise DraConstructsError(
                _where(where), "restart_policy", pod_spec["restartPolicy"], f"a {self._kind} does not allow it",
                f"use one of {list(self._restart_policies)}",
            )
        metadata = object_metadata(where, name, namespace, labels, annotations)
        super().__init__(scope, id, api_version=self._api_version, kind=self._kind, metadata=metadata)
        guard(scope)
        template_labels = check_labels(where, "pod_labels", pod_labels) or {}
        spec: dict[str, Any] = dict(workload_spec)
        if selector:
            match = {"dra-constructs.io/workload": name or self.name}
            template_labels.update(match)
            spec["selector"] = {"matchLabels": match}
        template: dict[str, Any] = {"spec": pod_spec}
        if template_labels:
            template["metadata"] = {"labels": template_labels}
        spec["template"] = template
        self.add_json_patch(cdk8s.JsonPatch.add("/spec", spec))


class GpuDeployment(_TemplatedWorkload):
    """An ``apps/v1`` Deployment of GPU pods (``replicas`` default 1; pod settings as ``PodOptions``)."""

    _kind = "Deployment"

    def __init__(self, scope: constructs.Construct, id: str, *, containers: Sequence[Container],
                 replicas: int = 1, name: str | None = None, namespace: str | None = None,
                 labels: Mapping[str, str] | None = None, annotations: Mapping[str, str] | None = None,
                 pod_labels: Mapping[str, str] | None = None, **pod: Any) -> None:
        super().__init__(scope, id, workload_spec={"replicas": replicas}, pod={"containers": containers, **pod},
                         selector=True, name=name, namespace=namespace, labels=labels,
                         annotations=annotations, pod_labels=pod_labels)


class GpuStatefulSet(_TemplatedWorkload):
    """An ``apps/v1`` StatefulSet of GPU pods; ``service_name`` names its governing Service."""

    _kind = "StatefulSet"

    def __init__(self, scope: constructs.Construct, id: str, *, containers: Sequence[Container],
                 service_name: str | None = None, replicas: int = 1, name: str | None = None,
                 namespace: str | None = None, labels: Mapping[str, str] | None = None,
                 annotations: Mapping[str, str] | None = None, pod_labels: Mapping[str, str] | None = None,
                 **pod: Any) -> None:
        spec: dict[str, Any] = {"replicas": replicas}
        if service_name is not None:
            spec["serviceName"] = check_dns_label(lazy_path(scope, id), "service_name", service_name)
        super().__init__(scope, id, workload_spec=spec, pod={"containers": containers, **pod}, selector=True,
                         name=name, namespace=namespace, labels=labels, annotations=annotations,
                         pod_labels=pod_labels)


class GpuJob(_TemplatedWorkload):
    """A ``batch/v1`` Job of GPU pods (restartPolicy ``Never`` by default; ``backoff_limit`` default 0)."""

    _api_version = "batch/v1"
    _kind = "Job"
    _restart_policy = "Never"
    _restart_policies = ("Never", "OnFailure")

    def __init__(self, scope: constructs.Construct, id: str, *, containers: Sequence[Container],
                 completions: int | None = None, parallelism: int | None = None, backoff_limit: int = 0,
                 name: str | None = None, namespace: str | None = None,
                 labels: Mapping[str, str] | None = None, annotations: Mapping[str, str] | None = None,
                 pod_labels: Mapping[str, str] | None = None, **pod: Any) -> None:
        spec: dict[str, Any] = {"backoffLimit": backoff_limit}
        if completions is not None:
            spec["completions"] = completions
        if parallelism is not None:
            spec["parallelism"] = parallelism
        super().__init__(scope, id, workload_spec=spec, pod={"containers": containers, **pod}, selector=False,
                         name=name, namespace=namespace, labels=labels, annotations=annotations,
                         pod_labels=pod_labels)
