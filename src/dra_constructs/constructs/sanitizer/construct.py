"""``SanitizerDaemonSet``: the preemption-barrier agent on every GPU node, in one construct.

It emits everything the agent needs and nothing more:

- a Namespace with Pod Security ``privileged`` (the agent needs hostPID and capabilities);
- a ServiceAccount, a ClusterRole/Binding with exactly the verbs the agent's API calls use
  (no wildcards, no secrets) and a Role/Binding for the Events it posts in its namespace;
- an immutable ConfigMap carrying the agent zipapp of this package version and its validated
  configuration (name and pod-template annotations carry their hashes: a change rolls the pods;
  the pod checks both files against the hashes its template carries before it starts);
- the DaemonSet (``hostPID``, ``system-node-critical``, probes, seccomp ``RuntimeDefault``,
  read-only root filesystem). It gets no DRA claim: the NVIDIA container runtime
  (``runtimeClassName``, ``NVIDIA_VISIBLE_DEVICES=all``) gives it every GPU and MIG device of
  the node, however many there are. It is privileged exactly where the agent creates or
  destroys MIG instances (MIG on, or ``partition_reset: mig-instance``); otherwise every
  capability is dropped but ``KILL``, ``SYS_ADMIN`` and (``device_handles``) ``SYS_PTRACE``.

cdk8s-plus-28 builds the Namespace, ServiceAccount, RBAC and ConfigMap; the DaemonSet is a
``cdk8s.ApiObject`` because cdk8s-plus-28's 1.28 schema has no ``hostPID``.
"""

from __future__ import annotations

import base64
import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import cdk8s
import cdk8s_plus_28 as kplus
import constructs
from pydantic import ValidationError

from dra_constructs import __version__
from dra_constructs.agent.config import AgentConfig
from dra_constructs.constructs.guardrails import suppress
from dra_constructs.constructs.sanitizer._agent_spec import (
    AMD_NODE_SELECTOR,
    AMD_NODE_TOLERATIONS,
    COMPONENT_LABEL,
    COMPONENT_VALUE,
    CONFIG_FILE,
    DEFAULT_NODE_SELECTOR,
    DEFAULT_NODE_TOLERATIONS,
    DEFAULT_RUNTIME_CLASS,
    EVENT_RULE,
    ZIPAPP_FILE,
    DriverAccess,
    NodeMigMode,
    Rule,
    agent_capabilities,
    agent_rules,
    amd_driver_access,
    driver_access,
)
from dra_constructs.constructs.sanitizer._bundle import RuntimeBundle, build_bundle
from dra_constructs.constructs.sanitizer._checkov import checkov_skips
from dra_constructs.constructs.sanitizer._pod import PodInputs, render_agent_pod_spec
from dra_constructs.constructs.scope import resolve_mig_mode, resolve_target
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails.context import SANITIZER_AMD_LABEL
from dra_constructs.target import Target
from dra_constructs.validation import check_dns_label, check_quantity

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_REQUESTS",
    "DEFAULT_SE_LINUX_TYPE",
    "ENV_DEVICES_REASON",
    "RUNTIME_HASH_ANNOTATION",
    "UNPINNED_IMAGE_ANNOTATION",
    "SanitizerDaemonSet",
]

#: Pod-template annotations with the SHA-256 of the runtime zipapp and of the configuration.
RUNTIME_HASH_ANNOTATION = "sanitizer.dra-constructs.io/runtime-sha256"
CONFIG_HASH_ANNOTATION = "sanitizer.dra-constructs.io/config-sha256"
#: DaemonSet annotation with the reason an image without digest was accepted.
UNPINNED_IMAGE_ANNOTATION = "sanitizer.dra-constructs.io/unpinned-image"
DEFAULT_REQUESTS: Mapping[str, str] = {"cpu": "100m", "memory": "256Mi"}
#: The agent reads this limit back from its cgroup (``memory.max``) and runs at most
#: ``(limit - agent_memory_bytes) // worker_memory_bytes`` CUDA fill workers at once (110-160 MB
#: each): 9 under 2Gi, so an 8 x 7 MIG node sanitizes in waves. Raise it for more at once.
DEFAULT_LIMITS: Mapping[str, str] = {"cpu": "2", "memory": "2Gi"}
#: Why the construct's own DaemonSet may set NVIDIA_VISIBLE_DEVICES (DRA002 refuses it elsewhere).
ENV_DEVICES_REASON = (
    "node agent, not a tenant: the sanitizer must reach every GPU and MIG device of its node, which a DRA "
    "claim cannot give on dense nodes (allocationMode All holds at most 32 devices); it gets them the way "
    "NVIDIA's own node components do, through the NVIDIA container runtime"
)

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_LOOPBACK = ("127.", "::1", "localhost")
_MIG_MODES = ("off", "static", "dynamic")
_RUNTIME_CLASS = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
#: The unprivileged agent container's SELinux type: container-selinux's super-privileged container domain.
DEFAULT_SE_LINUX_TYPE = "spc_t"
#: An SELinux type name (policy identifiers; udica's generated types add ``.process``).
_SE_LINUX_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_.]{0,252}$")
#: The confined container domains (the ones Pod Security ``baseline`` allows): no reads of host processes.
_CONFINED_SE_LINUX_TYPES = ("container_t", "container_init_t", "container_kvm_t", "container_engine_t")


class SanitizerDaemonSet(constructs.Construct):
    """The sanitizer agent (preemption barrier) on every GPU node, with least privilege.

    :param image: container image with Python 3.11+ and the agent's dependencies (build it from
        ``images/sanitizer/Dockerfile``); the agent code itself comes from the ConfigMap.
    :param image_digest: ``sha256:<64 hex>``: pins the image (``image@digest``, pull policy
        ``IfNotPresent``). Required, unless ``unpinned_image_reason`` says why not (a tag can
        be moved to other code running as root on every GPU node).
    :param unpinned_image_reason: accept an image without a digest, for this written reason
        (recorded in the DaemonSet's ``sanitizer.dra-constructs.io/unpinned-image`` annotation;
        pull policy ``Always``; checkov reports CKV_K8S_43). Default: none (refused).
    :param mig_mode: MIG on the nodes: ``"off"`` (whole GPUs only: the least-privilege pod),
        ``"static"`` or ``"dynamic"`` (the pod is privileged: the agent creates and destroys MIG
        instances). Default: ``dynamic_mig`` if ``config`` sets it, else the App's
        ``set_mig_mode``, else the target's default (``dynamic`` from 1.36, else ``static``).
    :param runtime_class_name: the RuntimeClass of the NVIDIA container runtime, which injects
        the devices and driver libraries. Default ``"nvidia"`` (the GPU Operator's); None where
        the node's default runtime is NVIDIA's.
    :param config: the agent configuration (``AgentConfig`` or a mapping of its fields): grace
        period, coverage threshold, quarantine policy, taint key, state and evidence paths,
        metrics port... Default: ``AgentConfig()``. The node name, the API access mode, the Event
        namespace and the Kubernetes version are filled in by the construct.
    :param name: name of every object, a DNS label (DeviceClass: ``<name>-nvidia-devices``, ConfigMap:
        ``<name>-runtime-<hash>``). Default ``dra-sanitizer``.
    :param namespace: namespace of the agent. Default ``dra-sanitizer``.
    :param create_namespace: emit the Namespace (Pod Security ``privileged``). Default True; with
        False the namespace must exist and admit privileged pods.
    :param node_selector: GPU nodes. Default ``{"nvidia.com/gpu.present": "true"}``.
    :param tolerations: node taints of GPU nodes. Default: ``nvidia.com/gpu`` (Exists, any effect).
    :param requests / limits: container resources. Default ``DEFAULT_REQUESTS`` / ``DEFAULT_LIMITS``.
    :param termination_grace_period_seconds: the agent's own shutdown time. Default 30.
    :param priority_class_name: default ``system-node-critical`` (None: no priority class).
    :param python: the interpreter in the image that runs the zipapp. Default ``python3``.
    :param network_policy: emit a NetworkPolicy: ingress only to the metrics port, egress only to
        ``api_server_ports`` (TCP, any address: the API server's address is not known at synth).
        Default True.
    :param api_server_ports: the API server's ports after Service DNAT. Default 443 and 6443.
    :param labels: extra labels on every object (they cannot override the construct's own). Default: none.
    :param kubernetes_version: target. Default: the app's context, else 1.32.
    :param se_linux_type: ``securityContext.seLinuxOptions.type`` of the unprivileged (whole-GPU)
        agent container. As ``container_t``, the runtimes' default on SELinux nodes, the agent may not
        read host processes' ``/proc/<pid>/fd``, ``maps`` and ``exe`` nor signal them, so every
        device-handle scan fails closed and no device is released. Default ``"spc_t"``
        (container-selinux's super-privileged container domain; ignored where SELinux is off; needs a
        Pod Security ``privileged`` namespace, which the emitted one is); another type of your own
        policy that may do both; None: not written (the runtime's default domain). The confined
        ``container_*`` types are refused. A privileged pod (MIG, AMD) runs in the runtime's domain
        for privileged containers and gets none.
    :param vendor: ``"nvidia"`` (NVML + CUDA through the NVIDIA container runtime) or ``"amd"``
        (AMD SMI + HIP, the cleaner shader through sysfs; the pod is privileged, docs/amd.md). AMD
        defaults: node selector ``feature.node.kubernetes.io/amd-gpu: "true"``, toleration
        ``amd.com/gpu``, no RuntimeClass, no MIG; the image needs ROCm's libamd_smi.so and
        libamdhip64.so and the ``amd`` extra. Default ``"nvidia"``.
    """

    def __init__(
        self,
        scope: constructs.Construct,
        id: str,
        *,
        image: str,
        image_digest: str | None = None,
        unpinned_image_reason: str | None = None,
        mig_mode: NodeMigMode | None = None,
        runtime_class_name: str | None = DEFAULT_RUNTIME_CLASS,
        config: AgentConfig | Mapping[str, Any] | None = None,
        name: str = "dra-sanitizer",
        namespace: str = "dra-sanitizer",
        create_namespace: bool = True,
        node_selector: Mapping[str, str] | None = DEFAULT_NODE_SELECTOR,
        tolerations: Sequence[Mapping[str, Any]] = DEFAULT_NODE_TOLERATIONS,
        requests: Mapping[str, str] | None = None,
        limits: Mapping[str, str] | None = None,
        termination_grace_period_seconds: int = 30,
        priority_class_name: str | None = "system-node-critical",
        python: str = "python3",
        network_policy: bool = True,
        api_server_ports: Sequence[int] = (443, 6443),
        labels: Mapping[str, str] | None = None,
        kubernetes_version: str | Target | None = None,
        vendor: Literal["nvidia", "amd"] = "nvidia",
        se_linux_type: str | None = DEFAULT_SE_LINUX_TYPE,
    ) -> None:
        where = f"{scope.node.path}/{id}" if scope.node.path else id
        target = resolve_target(scope, kubernetes_version, where)
        if vendor not in ("nvidia", "amd"):
            raise DraConstructsError(where, "vendor", vendor, "unknown GPU vendor", 'use "nvidia" or "amd"')
        if vendor == "amd":
            if mig_mode not in (None, "off"):
                raise DraConstructsError(where, "mig_mode", mig_mode, "AMD GPUs have no MIG (partitions are "
                                         "pre-created and the agent never changes them)", "leave mig_mode unset")
            if runtime_class_name not in (None, DEFAULT_RUNTIME_CLASS):
                raise DraConstructsError(where, "runtime_class_name", runtime_class_name, "the AMD agent gets its "
                                         "devices by being privileged, not from a container runtime",
                                         "leave runtime_class_name unset")
            runtime_class_name, mig_mode = None, "off"
            node_selector = AMD_NODE_SELECTOR if node_selector is DEFAULT_NODE_SELECTOR else node_selector
            tolerations = AMD_NODE_TOLERATIONS if tolerations is DEFAULT_NODE_TOLERATIONS else tolerations
        check_dns_label(where, "name", name)  # also a label value (app.kubernetes.io/instance)
        check_dns_label(where, "namespace", namespace)
        image_ref, pinned = _image_reference(where, image, image_digest, unpinned_image_reason)
        if runtime_class_name is not None and not _RUNTIME_CLASS.match(str(runtime_class_name)):
            raise DraConstructsError(where, "runtime_class_name", runtime_class_name, "not a RuntimeClass name",
                                     'use the NVIDIA runtime\'s RuntimeClass (e.g. "nvidia"), or None where it '
                                     "is the node's default runtime")
        _check_se_linux_type(where, se_linux_type)
        requests = dict(DEFAULT_REQUESTS if requests is None else requests)
        limits = dict(DEFAULT_LIMITS if limits is None else limits)
        for kind, values in (("requests", requests), ("limits", limits)):
            for key in ("cpu", "memory"):
                if key not in values:
                    raise DraConstructsError(where, f"{kind}[{key!r}]", None, f"{kind} must set {key}",
                                             f"give both cpu and memory, e.g. {dict(DEFAULT_LIMITS)}")
            for key, value in values.items():
                check_quantity(where, f"{kind}[{key!r}]", value)
        if termination_grace_period_seconds < 1:
            raise DraConstructsError(where, "termination_grace_period_seconds", termination_grace_period_seconds,
                                     "the agent needs time to persist its state on SIGTERM", "use at least 1")
        super().__init__(scope, id)

        self.target = target
        self.namespace = namespace
        # The App's settings are read once, here; everything below gets plain values.
        self.vendor = vendor
        self.agent_config, self.mig_mode = _resolve_config(
            where, config, namespace, target, mig_mode, "off" if vendor == "amd" else resolve_mig_mode(scope),
            vendor)
        self.bundle: RuntimeBundle = build_bundle(self.agent_config, where)
        self.access: DriverAccess = amd_driver_access() if vendor == "amd" else driver_access(
            self.agent_config, self.mig_mode, runtime_class_name)
        # A privileged container has every capability; listing some would only mislead.
        self.capabilities = [] if self.access.privileged else agent_capabilities(self.agent_config)
        self.rules: list[Rule] = agent_rules(target)
        # The user's labels first: they must not change the selector or the guardrails' label.
        common = {
            **dict(labels or {}),
            "app.kubernetes.io/name": "dra-sanitizer",
            "app.kubernetes.io/instance": name,
            "app.kubernetes.io/part-of": "dra-constructs",
            "app.kubernetes.io/version": __version__,
            COMPONENT_LABEL: COMPONENT_VALUE,
            **(dict([SANITIZER_AMD_LABEL]) if vendor == "amd" else {}),
        }
        self._chart_namespace = cdk8s.Chart.of(self).namespace

        if create_namespace:
            self.namespace_object: kplus.Namespace | None = kplus.Namespace(
                self, "Namespace", metadata=cdk8s.ApiObjectMetadata(name=namespace, labels={
                    **common,
                    # hostPID, privileged, added capabilities, AppArmor Unconfined and SELinux spc_t
                    # are outside the baseline level.
                    "pod-security.kubernetes.io/enforce": "privileged",
                }))
            self._cluster_scoped(cdk8s.ApiObject.of(self.namespace_object))
        else:
            self.namespace_object = None

        meta = cdk8s.ApiObjectMetadata(name=name, namespace=namespace, labels=common)
        self.service_account = kplus.ServiceAccount(self, "ServiceAccount", metadata=meta)
        cluster_meta = cdk8s.ApiObjectMetadata(name=name, labels=common)
        self.cluster_role = kplus.ClusterRole(self, "ClusterRole", metadata=cluster_meta)
        for rule in self.rules:
            self.cluster_role.allow(list(rule.verbs), _api_resource(rule))
        self.cluster_role_binding = kplus.ClusterRoleBinding(
            self, "ClusterRoleBinding", role=self.cluster_role, metadata=cluster_meta)
        self.cluster_role_binding.add_subjects(self.service_account)
        self._cluster_scoped(cdk8s.ApiObject.of(self.cluster_role))
        self._cluster_scoped(cdk8s.ApiObject.of(self.cluster_role_binding))
        self.role = kplus.Role(self, "Role", metadata=meta)
        self.role.allow(list(EVENT_RULE.verbs), _api_resource(EVENT_RULE))
        self.role_binding = kplus.RoleBinding(self, "RoleBinding", role=self.role, metadata=meta)
        self.role_binding.add_subjects(self.service_account)

        self.config_map = kplus.ConfigMap(
            self, "Runtime", immutable=True,
            metadata=cdk8s.ApiObjectMetadata(
                name=f"{name}-runtime-{self.bundle.sha256[:10]}", namespace=namespace, labels=common),
            data={CONFIG_FILE: self.bundle.config_yaml},
            binary_data={ZIPAPP_FILE: base64.b64encode(self.bundle.zipapp).decode("ascii")},
        )
        pod_spec = render_agent_pod_spec(PodInputs(
            image=image_ref, image_pull_policy="IfNotPresent" if pinned else "Always",
            config=self.agent_config, capabilities=self.capabilities, access=self.access,
            config_map_name=self.config_map.name, service_account_name=name,
            runtime_sha256=self.bundle.runtime_sha256, config_sha256=self.bundle.config_sha256,
            node_selector=dict(node_selector or {}), tolerations=list(tolerations),
            requests=requests, limits=limits,
            termination_grace_period_seconds=termination_grace_period_seconds,
            priority_class_name=priority_class_name, python=python, se_linux_type=se_linux_type,
        ))
        selector = {"app.kubernetes.io/name": "dra-sanitizer", "app.kubernetes.io/instance": name}
        self.daemon_set = cdk8s.ApiObject(
            self, "DaemonSet", api_version="apps/v1", kind="DaemonSet",
            metadata=cdk8s.ApiObjectMetadata(
                name=name, namespace=namespace, labels=common,
                annotations={**checkov_skips(self.capabilities, privileged=self.access.privileged, vendor=vendor),
                             **({UNPINNED_IMAGE_ANNOTATION: unpinned_image_reason.strip()}
                                if not pinned and unpinned_image_reason else {})}))
        self.network_policy = (
            self._network_policy(name, namespace, common, selector, api_server_ports) if network_policy else None)
        self.daemon_set.add_json_patch(cdk8s.JsonPatch.add("/spec", {
            "selector": {"matchLabels": selector},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {
                "metadata": {
                    "labels": common,
                    "annotations": {
                        RUNTIME_HASH_ANNOTATION: self.bundle.runtime_sha256,
                        CONFIG_HASH_ANNOTATION: self.bundle.config_sha256,
                    },
                },
                "spec": pod_spec,
            },
        }))
        if self.access.env:  # NVIDIA_VISIBLE_DEVICES=all (the AMD pod sets no device variable)
            suppress(self.daemon_set, "DRA002", reason=ENV_DEVICES_REASON)

    def _network_policy(self, name: str, namespace: str, labels: Mapping[str, str], selector: Mapping[str, str],
                        api_server_ports: Sequence[int]) -> kplus.NetworkPolicy:
        """Deny by default; metrics in, API server out (the agent needs no DNS: it dials the API IP)."""
        for port in (*api_server_ports, self.agent_config.metrics_port):
            if not 1 <= port <= 65535:
                raise DraConstructsError(self.node.path, "api_server_ports", port, "not a TCP port",
                                         "use ports between 1 and 65535")
        policy = kplus.NetworkPolicy(
            self, "NetworkPolicy",
            metadata=cdk8s.ApiObjectMetadata(name=name, namespace=namespace, labels=labels),
            selector=kplus.Pods.select(self, "AgentPods", labels=dict(selector)),
            ingress=kplus.NetworkPolicyTraffic(default=kplus.NetworkPolicyTrafficDefault.DENY),
            egress=kplus.NetworkPolicyTraffic(default=kplus.NetworkPolicyTrafficDefault.DENY),
        )
        egress_ports = [kplus.NetworkPolicyPort.tcp(p) for p in api_server_ports]
        metrics = [kplus.NetworkPolicyPort.tcp(self.agent_config.metrics_port)]
        for peer in (kplus.NetworkPolicyIpBlock.any_ipv4(self, "AnyIPv4"),
                     kplus.NetworkPolicyIpBlock.any_ipv6(self, "AnyIPv6")):
            policy.add_ingress_rule(peer, metrics)
            if egress_ports:
                policy.add_egress_rule(peer, egress_ports)
        return policy

    def _cluster_scoped(self, api_object: cdk8s.ApiObject) -> None:
        """Drop the namespace a namespaced Chart would put on a cluster-scoped object."""
        if self._chart_namespace:
            api_object.add_json_patch(cdk8s.JsonPatch.remove("/metadata/namespace"))


def _api_resource(rule: Rule) -> kplus.ApiResource:
    return kplus.ApiResource.custom(api_group=rule.api_group, resource_type=rule.resource)


def _image_reference(where: str, image: str, digest: str | None, unpinned_reason: str | None) -> tuple[str, bool]:
    """``image`` or ``image@digest``, and whether the result is pinned by digest."""
    if not image or any(c.isspace() for c in image):
        raise DraConstructsError(where, "image", image, "not an image reference",
                                 "build images/sanitizer/Dockerfile, push it, and pass its reference")
    if "@" in image:
        if digest is not None:
            raise DraConstructsError(where, "image_digest", digest, "the image already has a digest",
                                     "pass the digest once, in image= or in image_digest=")
        digest = image.partition("@")[2]
        image = image.partition("@")[0]
    if digest is None:
        if unpinned_reason is None or not str(unpinned_reason).strip():
            raise DraConstructsError(
                where, "image_digest", None,
                f"the image {image!r} is not pinned: its tag can be moved to other code, which then runs as root "
                "with hostPID on every GPU node",
                "push the image and pass image_digest='sha256:...' (docker inspect --format "
                "'{{index .RepoDigests 0}}'; see docs/sanitizer-construct.md), or "
                "unpinned_image_reason='why a tag is acceptable here'")
        return image, False
    if unpinned_reason is not None:
        raise DraConstructsError(where, "unpinned_image_reason", unpinned_reason, "the image is pinned by digest",
                                 "drop unpinned_image_reason")
    if not _DIGEST.match(digest):
        raise DraConstructsError(where, "image_digest", digest, "not a sha256 image digest",
                                 "write sha256: followed by 64 lowercase hex digits (docker inspect RepoDigests)")
    return f"{image}@{digest}", True


def _node_mig_mode(where: str, config: AgentConfig, explicit: str | None, app_mode: str | None,
                   target: Target) -> NodeMigMode:
    """The construct's ``mig_mode``, else the config's explicit ``dynamic_mig``, else the App's."""
    if explicit is not None:
        if explicit not in _MIG_MODES:
            raise DraConstructsError(where, "mig_mode", explicit, "not a node MIG mode",
                                     'write "off" (whole GPUs), "static" or "dynamic"')
        if "dynamic_mig" in config.model_fields_set and config.dynamic_mig != (explicit == "dynamic"):
            raise DraConstructsError(where, "config.dynamic_mig", config.dynamic_mig,
                                     f"contradicts mig_mode={explicit!r}", "set one of the two")
        mode = explicit
    elif "dynamic_mig" in config.model_fields_set:
        mode = "dynamic" if config.dynamic_mig else "static"
    else:
        mode = app_mode or target.default_mig_mode
    if mode != "off":
        mode = target.check_mig_mode(mode, where)
    return mode  # type: ignore[return-value]  # one of _MIG_MODES, checked above


def _resolve_config(where: str, config: AgentConfig | Mapping[str, Any] | None, namespace: str,
                    target: Target, mig_mode: str | None, app_mig_mode: str | None,
                    vendor: str = "nvidia") -> tuple[AgentConfig, NodeMigMode]:
    """The user's configuration with the construct's parts filled in, and the node MIG mode."""
    if config is None:
        config = AgentConfig()
    elif not isinstance(config, AgentConfig):
        fields = dict(config)
        if vendor == "amd":
            fields.setdefault("backend", "amd")  # validated as the AMD agent's (its reset policy, ...)
        try:
            config = AgentConfig.model_validate(fields)
        except ValidationError as error:
            first = error.errors()[0]
            raise DraConstructsError(
                where, "config." + ".".join(str(p) for p in first["loc"]), first.get("input"), first["msg"],
                "see AgentConfig in dra_constructs.agent.config",
            ) from None
    backend = "amd" if vendor == "amd" else "nvml"
    if config.backend == "nvml" and backend == "amd" and "backend" not in config.model_fields_set:
        # vendor="amd" picks the backend; validated again, so the defaults that follow it (no canary) apply
        config = AgentConfig.model_validate({**config.model_dump(exclude_unset=True), "backend": "amd"})
    problems: list[tuple[str, Any, str, str]] = []
    if config.node_name:
        problems.append(("node_name", config.node_name, "every node runs the agent with its own name",
                         "leave node_name empty: the pod passes spec.nodeName"))
    if config.backend != backend:
        problems.append(("backend", config.backend, f"the DaemonSet sanitizes real {vendor} GPUs",
                         f"use backend={backend!r} (or vendor={'amd' if backend == 'nvml' else 'nvidia'!r}; the "
                         "simulated backend is for tests and `simulate`)"))
    if config.kube.mode != "in-cluster":
        problems.append(("kube.mode", config.kube.mode, "the agent reaches the API with its service account",
                         "leave kube.mode='in-cluster'"))
    if config.metrics_port == 0:
        problems.append(("metrics_port", 0, "the probes need a fixed port", "pick a port, e.g. 9402"))
    if config.metrics_address.startswith(_LOOPBACK):
        problems.append(("metrics_address", config.metrics_address, "the kubelet probes the pod IP",
                         "listen on 0.0.0.0 (or the pod IP)"))
    # The host directories mounted (state_dir, the evidence file's directory) must not be "/".
    directories = (("state_dir", config.state_dir, config.state_dir),
                   ("evidence_file", config.evidence_file, posixpath.dirname(config.evidence_file)))
    for field, path, directory in directories:
        if not path.startswith("/") or posixpath.normpath(directory) == "/" or (
                field == "evidence_file" and path.endswith("/")):
            problems.append((field, path, "must be an absolute path in a directory of its own (mounted from "
                             "the host)", "use e.g. /var/lib/dra-sanitizer or /var/log/dra-sanitizer/evidence.jsonl"))
    kube_set = config.kube.model_fields_set
    if "event_namespace" in kube_set and config.kube.event_namespace != namespace:
        problems.append(("kube.event_namespace", config.kube.event_namespace,
                         "the agent may create Events only in its own namespace", f"leave it unset or {namespace!r}"))
    if config.kube.kubernetes_version is not None and Target.parse(
            config.kube.kubernetes_version, where) != Target.parse(str(target), where):
        problems.append(("kube.kubernetes_version", config.kube.kubernetes_version,
                         f"differs from the construct's target {target}",
                         "set kubernetes_version= on the construct (or the app) instead"))
    if problems:
        field, value, problem, fix = problems[0]
        raise DraConstructsError(where, f"config.{field}", value, problem, fix)
    mode = _node_mig_mode(where, config, mig_mode, app_mig_mode, target)
    kube = config.kube.model_copy(update={"event_namespace": namespace, "kubernetes_version": str(target)})
    return config.model_copy(update={"kube": kube, "dynamic_mig": mode == "dynamic"}), mode


def _check_se_linux_type(where: str, value: str | None) -> None:
    """An SELinux type name, and not one of the confined container domains (they fail every scan)."""
    if value is None:
        return
    if not isinstance(value, str) or not _SE_LINUX_TYPE.match(value):
        raise DraConstructsError(where, "se_linux_type", value, "not an SELinux type name",
                                 f'use "{DEFAULT_SE_LINUX_TYPE}", a type of your node policy, or None')
    if value in _CONFINED_SE_LINUX_TYPES:
        raise DraConstructsError(
            where, "se_linux_type", value,
            "a confined container domain: SELinux refuses it reads of other processes' /proc/<pid>/fd, maps and "
            "exe and signals to them, so every device-handle scan fails closed and no device is ever released",
            f'use "{DEFAULT_SE_LINUX_TYPE}" (the default), a type of your own policy that may read and signal every '
            "process, or None to leave the runtime's default")
