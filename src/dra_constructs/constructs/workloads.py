"""Pods and pod-template workloads (Deployment, Job, StatefulSet) whose containers use DRA claims.

The short GPU-first path: typed options with GPU defaults (a grace path for preemption, rollouts
that need no spare GPU, Jobs that survive preemption). For everything else cdk8s-plus-28 models
(probes, secrets as env, volumes, Services), build the workload with cdk8s-plus and add the
claims with :func:`dra_constructs.attach_claims`.

These constructs are ``cdk8s.ApiObject`` subclasses that render their manifests in Python
(``constructs/_rendered.py``), the cheapest route through jsii (cdk8s-plus-28's 1.28 L1 would drop
the DRA fields). ``add_json_patch`` and ``metadata`` work as on any ApiObject.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn

import cdk8s
import constructs

from dra_constructs.constructs._rendered import OwnManifest, _chart_defaults
from dra_constructs.constructs.guardrails import guard
from dra_constructs.constructs.scope import duplicate_id, generated_name, lazy_path, object_name, resolve_target
from dra_constructs.errors import DraConstructsError
from dra_constructs.podspec import (
    DEFAULT_GRACE_SECONDS,
    Container,
    PodClaim,
    PreStop,
    check_claim_namespaces,
    items_of,
    render_pod_spec,
)
from dra_constructs.target import Target
from dra_constructs.validation import (
    DNS1123_LABEL_MAX,
    Where,
    _where,
    check_annotations,
    check_dns_label,
    check_int,
    check_labels,
    did_you_mean,
    label_value,
    object_metadata,
)
from dra_constructs.workload_options import PodFailurePolicy, RollingUpdate, VolumeClaimTemplate, render_strategy

__all__ = ["GpuDeployment", "GpuJob", "GpuPod", "GpuStatefulSet", "PodOptions"]

#: Label that ties a workload's selector to its pod template.
WORKLOAD_LABEL = "dra-constructs.io/workload"

_POD_OPTIONS = (
    "containers", "claims", "termination_grace_period_seconds", "pre_stop", "restart_policy", "node_selector",
    "tolerations", "service_account_name", "init_containers", "volumes", "priority_class_name", "extra_spec",
    "kubernetes_version", "name", "namespace", "labels", "annotations",
)


@dataclass
class PodOptions:
    """Pod-level settings every workload construct takes as keyword arguments.

    :param containers: the containers (a list); their ``claims`` reference templates (``template.use()``).
    :param claims: extra pod claims (e.g. an existing ``ResourceClaim`` by name). Default: derived.
    :param termination_grace_period_seconds: default 60: time to checkpoint after SIGTERM on preemption.
    :param pre_stop: preStop hook of every container. Default: ``PreStop()`` (sleep 5 s).
    :param restart_policy: Pod: any; Deployment/StatefulSet: ``Always``; Job: ``Never`` (default) or ``OnFailure``.
    :param node_selector: node labels (a mapping); ``tolerations``: a list of toleration mappings.
    :param service_account_name / priority_class_name: names of existing objects.
    :param init_containers: run before the containers (no preStop hook).
    :param volumes: pod volumes (API shape, e.g. ``{'name': 'shm', 'emptyDir': {'medium': 'Memory'}}``);
        every ``volume_mounts[].name`` must name one.
    :param extra_spec: other Pod spec fields, as in the API (camelCase); names and JSON types are
        checked against the target version.
    """

    containers: Sequence[Container]
    claims: Sequence[PodClaim] = ()
    termination_grace_period_seconds: int = DEFAULT_GRACE_SECONDS
    pre_stop: PreStop | None = None
    restart_policy: str | None = None
    node_selector: Mapping[str, str] | None = None
    tolerations: Sequence[Mapping[str, Any]] = ()
    service_account_name: str | None = None
    init_containers: Sequence[Container] = ()
    volumes: Sequence[Mapping[str, Any]] = ()
    priority_class_name: str | None = None
    extra_spec: Mapping[str, Any] | None = None
    kubernetes_version: str | Target | None = None
    claim_template_volumes: Sequence[str] = field(default_factory=tuple)

    def render(self, scope: constructs.Construct, where: Where) -> dict[str, Any]:
        """The validated Pod spec."""
        target = resolve_target(scope, self.kubernetes_version, "kubernetes_version")
        return render_pod_spec(
            self.containers, claims=self.claims,
            termination_grace_period_seconds=self.termination_grace_period_seconds, pre_stop=self.pre_stop,
            restart_policy=self.restart_policy, node_selector=self.node_selector, tolerations=self.tolerations,
            service_account_name=self.service_account_name, init_containers=self.init_containers,
            volumes=self.volumes, priority_class_name=self.priority_class_name, extra_spec=self.extra_spec,
            kubernetes_version=target, where=where, claim_template_volumes=self.claim_template_volumes,
        )


def _reject_unknown(where: Where, kind: str, unknown: Mapping[str, Any], options: Sequence[str]) -> None:
    if unknown:
        key = sorted(unknown)[0]
        raise DraConstructsError(
            _where(where), key, unknown[key], f"not a pod option of {kind}" + did_you_mean(key, options),
            f"use one of {sorted(options)}, or extra_spec={{...}} for other Pod spec fields",
        )


def _name(scope: constructs.Construct, id: str, name: str | None, max_length: int = 63) -> str | None:
    return name if name is not None else generated_name(scope, id, max_length)


def _check_namespaces(scope: constructs.Construct, where: Where, pod: PodOptions, namespace: str | None) -> None:
    """The templates the containers use are in the workload's namespace (explicit, else the chart's)."""
    containers = [*(pod.init_containers or ()), *pod.containers]
    uses = {c.name: c.claims for c in containers if isinstance(c, Container) and c.claims}
    if any(use.template_namespace for group in uses.values() for use in group):
        check_claim_namespaces(where, uses, namespace if namespace is not None else _chart_defaults(scope).namespace)


class GpuPod(OwnManifest, cdk8s.ApiObject):
    """A Pod whose containers use DRA claims, with a grace path for preemption (options: ``PodOptions``)."""

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
        volumes: Sequence[Mapping[str, Any]] = (),
        priority_class_name: str | None = None,
        extra_spec: Mapping[str, Any] | None = None,
        kubernetes_version: str | Target | None = None,
        name: str | None = None,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        **unknown: NoReturn,
    ) -> None:
        where = lazy_path(scope, id)
        _reject_unknown(where, "GpuPod", unknown, _POD_OPTIONS)
        options = PodOptions(
            containers=containers, claims=claims, termination_grace_period_seconds=termination_grace_period_seconds,
            pre_stop=pre_stop, restart_policy=restart_policy, node_selector=node_selector, tolerations=tolerations,
            service_account_name=service_account_name, init_containers=init_containers, volumes=volumes,
            priority_class_name=priority_class_name, extra_spec=extra_spec, kubernetes_version=kubernetes_version,
        )
        spec = options.render(scope, where)
        _check_namespaces(scope, where, options, namespace)
        metadata = object_metadata(where, _name(scope, id, name), namespace, labels, annotations)
        try:
            self._dra_create(scope, id, "v1", "Pod", metadata)
        except RuntimeError as error:
            raise duplicate_id(error, where, id) from None
        guard(scope)
        self._dra_record(scope, "v1", "Pod", metadata, (metadata or {}).get("name") or object_name(self, scope, id),
                         spec)


class _TemplatedWorkload(OwnManifest, cdk8s.ApiObject):
    """A workload with ``spec.template`` (a pod template) and, if ``selector``, a label selector."""

    _api_version = "apps/v1"
    _kind = ""
    _restart_policy: str | None = None
    _restart_policies: tuple[str, ...] = ("Always",)
    _max_name = 253

    def __init__(
        self,
        scope: constructs.Construct,
        id: str,
        *,
        workload_spec: Mapping[str, Any],
        pod: PodOptions,
        selector: bool,
        name: str | None,
        namespace: str | None,
        labels: Mapping[str, str] | None,
        annotations: Mapping[str, str] | None,
        pod_labels: Mapping[str, str] | None,
        pod_annotations: Mapping[str, str] | None,
        where: Where,
    ) -> None:
        if pod.restart_policy is None:
            pod.restart_policy = self._restart_policy
        pod_spec = pod.render(scope, where)
        _check_namespaces(scope, where, pod, namespace)
        if pod_spec.get("restartPolicy", "Always") not in self._restart_policies:
            raise DraConstructsError(
                _where(where), "restart_policy", pod_spec["restartPolicy"], f"a {self._kind} does not allow it",
                f"use one of {list(self._restart_policies)}",
            )
        if name is not None and self._max_name == DNS1123_LABEL_MAX:
            check_dns_label(where, "metadata.name", name)  # it becomes a label value / hostname
        metadata = object_metadata(where, _name(scope, id, name), namespace, labels, annotations)
        template_labels = check_labels(where, "pod_labels", pod_labels) or {}
        template_annotations = check_annotations(where, "pod_annotations", pod_annotations)
        spec: dict[str, Any] = dict(workload_spec)
        try:
            self._dra_create(scope, id, self._api_version, self._kind, metadata)
        except RuntimeError as error:
            raise duplicate_id(error, where, id) from None
        guard(scope)
        object_name_ = (metadata or {}).get("name") or object_name(self, scope, id)
        if selector:
            match = {WORKLOAD_LABEL: label_value(object_name_)}
            template_labels.update(match)
            spec["selector"] = {"matchLabels": match}
        template: dict[str, Any] = {"spec": pod_spec}
        template_metadata: dict[str, Any] = {}
        if template_labels:
            template_metadata["labels"] = template_labels
        if template_annotations:
            template_metadata["annotations"] = template_annotations
        if template_metadata:
            template["metadata"] = template_metadata
        spec["template"] = template
        self._dra_record(scope, self._api_version, self._kind, metadata, object_name_, spec)


class GpuDeployment(_TemplatedWorkload):
    """An ``apps/v1`` Deployment of GPU pods (pod options: ``PodOptions``).

    :param replicas: default 1.
    :param strategy: default ``RollingUpdate(max_surge=0, max_unavailable=1)``: a rollout frees one
        pod's devices before its successor asks for them (Kubernetes' 25% surge needs spare GPUs);
        ``"Recreate"`` stops all pods first.
    :param pod_labels / pod_annotations: metadata of the pod template.
    """

    _kind = "Deployment"

    def __init__(
        self,
        scope: constructs.Construct,
        id: str,
        *,
        containers: Sequence[Container],
        replicas: int = 1,
        strategy: RollingUpdate | Literal["Recreate"] | None = None,
        min_ready_seconds: int | None = None,
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
        name: str | None = None,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        pod_labels: Mapping[str, str] | None = None,
        pod_annotations: Mapping[str, str] | None = None,
        **unknown: NoReturn,
    ) -> None:
        where = lazy_path(scope, id)
        _reject_unknown(where, "GpuDeployment", unknown,
                        (*_POD_OPTIONS, "replicas", "strategy", "min_ready_seconds", "pod_labels", "pod_annotations"))
        spec: dict[str, Any] = {
            "replicas": check_int(where, "replicas", replicas, 0),
            "strategy": render_strategy(where, RollingUpdate() if strategy is None else strategy),
        }
        if min_ready_seconds is not None:
            spec["minReadySeconds"] = check_int(where, "min_ready_seconds", min_ready_seconds, 0)
        pod = PodOptions(
            containers=containers, claims=claims, termination_grace_period_seconds=termination_grace_period_seconds,
            pre_stop=pre_stop, restart_policy=restart_policy, node_selector=node_selector, tolerations=tolerations,
            service_account_name=service_account_name, init_containers=init_containers, volumes=volumes,
            priority_class_name=priority_class_name, extra_spec=extra_spec, kubernetes_version=kubernetes_version,
        )
        super().__init__(scope, id, workload_spec=spec, pod=pod, selector=True, name=name, namespace=namespace,
                         labels=labels, annotations=annotations, pod_labels=pod_labels,
                         pod_annotations=pod_annotations, where=where)


class GpuStatefulSet(_TemplatedWorkload):
    """An ``apps/v1`` StatefulSet of GPU pods (pod options: ``PodOptions``).

    :param service_name: its governing (headless) Service.
    :param replicas: default 1.
    :param volume_claim_templates: one PVC per replica (``VolumeClaimTemplate``); containers mount
        them by name through ``volume_mounts``.
    """

    _kind = "StatefulSet"
    _max_name = DNS1123_LABEL_MAX

    def __init__(
        self,
        scope: constructs.Construct,
        id: str,
        *,
        containers: Sequence[Container],
        service_name: str | None = None,
        replicas: int = 1,
        volume_claim_templates: Sequence[VolumeClaimTemplate] = (),
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
        name: str | None = None,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        pod_labels: Mapping[str, str] | None = None,
        pod_annotations: Mapping[str, str] | None = None,
        **unknown: NoReturn,
    ) -> None:
        where = lazy_path(scope, id)
        _reject_unknown(where, "GpuStatefulSet", unknown,
                        (*_POD_OPTIONS, "service_name", "replicas", "volume_claim_templates", "pod_labels",
                         "pod_annotations"))
        spec: dict[str, Any] = {"replicas": check_int(where, "replicas", replicas, 0)}
        if service_name is not None:
            spec["serviceName"] = check_dns_label(where, "service_name", service_name)
        templates = items_of(where, "volume_claim_templates", volume_claim_templates, VolumeClaimTemplate,
                             "VolumeClaimTemplate(name='data', storage='100Gi')")
        if templates:
            spec["volumeClaimTemplates"] = [t.render(where) for t in templates]
        pod = PodOptions(
            containers=containers, claims=claims, termination_grace_period_seconds=termination_grace_period_seconds,
            pre_stop=pre_stop, restart_policy=restart_policy, node_selector=node_selector, tolerations=tolerations,
            service_account_name=service_account_name, init_containers=init_containers, volumes=volumes,
            priority_class_name=priority_class_name, extra_spec=extra_spec, kubernetes_version=kubernetes_version,
            claim_template_volumes=tuple(t.name for t in templates),
        )
        super().__init__(scope, id, workload_spec=spec, pod=pod, selector=True, name=name, namespace=namespace,
                         labels=labels, annotations=annotations, pod_labels=pod_labels,
                         pod_annotations=pod_annotations, where=where)


class GpuJob(_TemplatedWorkload):
    """A ``batch/v1`` Job of GPU pods (pod options: ``PodOptions``; restartPolicy ``Never`` by default).

    :param completions / parallelism: as in the API (``completions`` >= 1).
    :param completion_mode: ``"Indexed"`` gives each pod ``JOB_COMPLETION_INDEX`` (needs ``completions``).
    :param backoff_limit: default 0: retries of application failures.
    :param pod_failure_policy: default ``PodFailurePolicy()``: a preempted pod (``DisruptionTarget``)
        is replaced without counting against ``backoff_limit``. Needs restartPolicy ``Never``;
        ``None`` turns it off.
    :param ttl_seconds_after_finished: delete the finished Job (and its pods, releasing claims) after this.
    :param active_deadline_seconds: fail the Job after this long.
    """

    _api_version = "batch/v1"
    _kind = "Job"
    _restart_policy = "Never"
    _restart_policies = ("Never", "OnFailure")
    _max_name = DNS1123_LABEL_MAX  # the job-name label of its pods

    def __init__(
        self,
        scope: constructs.Construct,
        id: str,
        *,
        containers: Sequence[Container],
        completions: int | None = None,
        parallelism: int | None = None,
        completion_mode: Literal["NonIndexed", "Indexed"] | None = None,
        backoff_limit: int = 0,
        pod_failure_policy: PodFailurePolicy | Literal["default"] | None = "default",
        ttl_seconds_after_finished: int | None = None,
        active_deadline_seconds: int | None = None,
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
        name: str | None = None,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        pod_labels: Mapping[str, str] | None = None,
        pod_annotations: Mapping[str, str] | None = None,
        **unknown: NoReturn,
    ) -> None:
        where = lazy_path(scope, id)
        _reject_unknown(where, "GpuJob", unknown,
                        (*_POD_OPTIONS, "completions", "parallelism", "completion_mode", "backoff_limit",
                         "pod_failure_policy", "ttl_seconds_after_finished", "active_deadline_seconds",
                         "pod_labels", "pod_annotations"))
        spec: dict[str, Any] = {"backoffLimit": check_int(where, "backoff_limit", backoff_limit, 0)}
        if completions is not None:
            spec["completions"] = check_int(where, "completions", completions, 1)
        if parallelism is not None:
            spec["parallelism"] = check_int(where, "parallelism", parallelism, 0)
        if completion_mode is not None:
            if completion_mode not in ("NonIndexed", "Indexed"):
                raise DraConstructsError(_where(where), "completion_mode", completion_mode, "not a completion mode",
                                         "use 'Indexed' or 'NonIndexed'")
            if completion_mode == "Indexed" and completions is None:
                raise DraConstructsError(_where(where), "completion_mode", completion_mode,
                                         "an Indexed Job needs completions", "pass completions=N (one index per pod)")
            spec["completionMode"] = completion_mode
        effective_restart = restart_policy or self._restart_policy
        if pod_failure_policy == "default":
            pod_failure_policy = PodFailurePolicy() if effective_restart == "Never" else None
        if pod_failure_policy is not None:
            if not isinstance(pod_failure_policy, PodFailurePolicy):
                raise DraConstructsError(_where(where), "pod_failure_policy", pod_failure_policy,
                                         "must be a PodFailurePolicy", "use PodFailurePolicy(...) or None")
            if effective_restart != "Never":
                raise DraConstructsError(_where(where), "pod_failure_policy", pod_failure_policy,
                                         f"needs restartPolicy Never (got {effective_restart})",
                                         "drop restart_policy='OnFailure' or pass pod_failure_policy=None")
            rendered = pod_failure_policy.render(where)
            if rendered is not None:
                spec["podFailurePolicy"] = rendered
        if ttl_seconds_after_finished is not None:
            spec["ttlSecondsAfterFinished"] = check_int(where, "ttl_seconds_after_finished",
                                                        ttl_seconds_after_finished, 0)
        if active_deadline_seconds is not None:
            spec["activeDeadlineSeconds"] = check_int(where, "active_deadline_seconds", active_deadline_seconds, 1)
        pod = PodOptions(
            containers=containers, claims=claims, termination_grace_period_seconds=termination_grace_period_seconds,
            pre_stop=pre_stop, restart_policy=restart_policy, node_selector=node_selector, tolerations=tolerations,
            service_account_name=service_account_name, init_containers=init_containers, volumes=volumes,
            priority_class_name=priority_class_name, extra_spec=extra_spec, kubernetes_version=kubernetes_version,
        )
        super().__init__(scope, id, workload_spec=spec, pod=pod, selector=False, name=name, namespace=namespace,
                         labels=labels, annotations=annotations, pod_labels=pod_labels,
                         pod_annotations=pod_annotations, where=where)
