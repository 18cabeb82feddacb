"""The agent's pod template spec, as a plain dict (pure Python, no cdk8s).

Rendered by hand rather than through :func:`dra_constructs.podspec.render_pod_spec`: the agent
needs fields that renderer leaves to ``extra`` (hostPID, probes, volumes, security contexts)
and no preStop hook (its SIGTERM path is the shutdown), so only the claim part would be shared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_constructs.agent.config import AgentConfig
from dra_constructs.constructs.sanitizer._agent_spec import (
    AGENT_CONTAINER,
    CLAIM_NAME,
    CONFIG_FILE,
    RUNTIME_DIR,
    ZIPAPP_FILE,
    Capability,
    host_paths,
)

__all__ = ["PodInputs", "agent_command", "render_agent_pod_spec"]


@dataclass(frozen=True)
class PodInputs:
    """Everything the pod spec is built from (validated by the construct before)."""

    image: str
    image_pull_policy: str
    config: AgentConfig
    capabilities: Sequence[Capability]
    config_map_name: str
    service_account_name: str
    claim_template_name: str
    node_selector: Mapping[str, str]
    tolerations: Sequence[Mapping[str, Any]]
    requests: Mapping[str, str]
    limits: Mapping[str, str]
    termination_grace_period_seconds: int
    priority_class_name: str | None
    python: str = "python3"
    extra_env: Mapping[str, str] = field(default_factory=dict)


def agent_command(python: str) -> list[str]:
    """``python agent.pyz run --config ... --node $(NODE_NAME)`` (the kubelet expands the variable)."""
    return [
        python, f"{RUNTIME_DIR}/{ZIPAPP_FILE}", "run",
        "--config", f"{RUNTIME_DIR}/{CONFIG_FILE}",
        "--node", "$(NODE_NAME)",
    ]


def _probe(path: str, period: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": "metrics"},
        "periodSeconds": period,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }


def render_agent_pod_spec(inputs: PodInputs) -> dict[str, Any]:
    """The DaemonSet's ``spec.template.spec``."""
    config = inputs.config
    paths = host_paths(config)
    env: list[dict[str, Any]] = [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        # Read-only root filesystem: no bytecode cache, temp files and CUDA caches in /tmp.
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "HOME", "value": "/tmp"},
        {"name": "TMPDIR", "value": "/tmp"},
    ]
    env += [{"name": k, "value": v} for k, v in sorted(inputs.extra_env.items())]
    container: dict[str, Any] = {
        "name": AGENT_CONTAINER,
        "image": inputs.image,
        "imagePullPolicy": inputs.image_pull_policy,
        "command": agent_command(inputs.python),
        "env": env,
        "ports": [{"name": "metrics", "containerPort": config.metrics_port, "protocol": "TCP"}],
        # Liveness: the process answers; readiness: it has listed claims/pods and holds NVML.
        "livenessProbe": {**_probe("/healthz", 20, 3), "initialDelaySeconds": 10},
        "readinessProbe": _probe("/readyz", 10, 3),
        "resources": {
            "requests": dict(inputs.requests),
            "limits": dict(inputs.limits),
            "claims": [{"name": CLAIM_NAME}],
        },
        "securityContext": {
            # Root with every capability dropped but those listed (NVML and signalling need
            # uid 0 plus the named capabilities; Kubernetes has no ambient caps for non-root).
            "runAsUser": 0,
            "runAsGroup": 0,
            "runAsNonRoot": False,
            "privileged": False,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"], "add": [c.name for c in inputs.capabilities]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [
            {"name": "runtime", "mountPath": RUNTIME_DIR, "readOnly": True},
            *({"name": name, "mountPath": path} for name, path in paths.items()),
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    spec: dict[str, Any] = {
        "serviceAccountName": inputs.service_account_name,
        # The agent calls the API server with its service account (list/watch, device taints).
        "automountServiceAccountToken": True,
        # NVML returns PIDs in the caller's PID namespace and drops invisible ones (driver >=
        # 535.113.01): without the host PID namespace the agent would see no tenant process.
        "hostPID": True,
        "terminationGracePeriodSeconds": inputs.termination_grace_period_seconds,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "resourceClaims": [{"name": CLAIM_NAME, "resourceClaimTemplateName": inputs.claim_template_name}],
        "volumes": [
            {"name": "runtime", "configMap": {"name": inputs.config_map_name, "defaultMode": 0o444}},
            *({"name": name, "hostPath": {"path": path, "type": "DirectoryOrCreate"}} for name, path in paths.items()),
            {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
        ],
    }
    if inputs.priority_class_name:
        spec["priorityClassName"] = inputs.priority_class_name
    if inputs.node_selector:
        spec["nodeSelector"] = dict(inputs.node_selector)
    if inputs.tolerations:
        spec["tolerations"] = [dict(t) for t in inputs.tolerations]
    return spec
