"""The agent's pod template spec, as a plain dict (pure Python, no cdk8s).

Rendered by hand rather than through :func:`dra_constructs.podspec.render_pod_spec`: the agent
needs fields that renderer leaves to ``extra`` (hostPID, probes, volumes, security contexts)
and no preStop hook (its SIGTERM path is the shutdown), and it has no device claim at all: it
reaches the driver through the NVIDIA container runtime (``NVIDIA_VISIBLE_DEVICES=all``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_constructs.agent.config import AgentConfig
from dra_constructs.constructs.sanitizer._agent_spec import (
    AGENT_CONTAINER,
    CONFIG_FILE,
    CONFIG_SHA_ENV,
    RUNTIME_DIR,
    RUNTIME_SHA_ENV,
    ZIPAPP_FILE,
    Capability,
    DriverAccess,
    host_paths,
)

__all__ = ["VERIFY_BOOTSTRAP", "PodInputs", "agent_command", "render_agent_pod_spec"]

#: ``python -c`` program the container starts with: it hashes the mounted zipapp and config and
#: runs the zipapp only when both match the SHA-256 the pod template carries (env), else exits 1
#: naming the file. It lives in the pod template, not in the ConfigMap it checks: whoever can
#: replace that ConfigMap cannot change what it is checked against without changing the DaemonSet.
VERIFY_BOOTSTRAP = (
    "import hashlib,os,runpy,sys\n"
    "d=os.path.dirname(sys.argv[1])\n"
    f"for f,v in (({ZIPAPP_FILE!r},{RUNTIME_SHA_ENV!r}),({CONFIG_FILE!r},{CONFIG_SHA_ENV!r})):\n"
    " h=hashlib.sha256(open(os.path.join(d,f),'rb').read()).hexdigest()\n"
    " if h!=os.environ.get(v):\n"
    "  sys.exit('dra-sanitizer: refusing to start: '+f+' has sha256 '+h+', the pod template pins '"
    "+str(os.environ.get(v))+' ('+v+')')\n"
    "sys.argv=sys.argv[1:]\n"
    "runpy.run_path(sys.argv[0],run_name='__main__')\n"
)


@dataclass(frozen=True)
class PodInputs:
    """Everything the pod spec is built from (validated by the construct before)."""

    image: str
    image_pull_policy: str
    config: AgentConfig
    capabilities: Sequence[Capability]
    access: DriverAccess
    config_map_name: str
    service_account_name: str
    runtime_sha256: str
    config_sha256: str
    node_selector: Mapping[str, str]
    tolerations: Sequence[Mapping[str, Any]]
    requests: Mapping[str, str]
    limits: Mapping[str, str]
    termination_grace_period_seconds: int
    priority_class_name: str | None
    python: str = "python3"
    extra_env: Mapping[str, str] = field(default_factory=dict)
    #: ``securityContext.seLinuxOptions.type`` of the unprivileged container (None: not written).
    se_linux_type: str | None = None


def agent_command(python: str) -> list[str]:
    """``python -c <verify> agent.pyz run --config ... --node $(NODE_NAME)`` (the kubelet expands the variable)."""
    return [
        python, "-c", VERIFY_BOOTSTRAP, f"{RUNTIME_DIR}/{ZIPAPP_FILE}", "run",
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


def _security_context(inputs: PodInputs) -> dict[str, Any]:
    """Root; privileged only where the agent manages MIG instances, else only the listed capabilities."""
    # NVML and signalling need uid 0 plus the named capabilities (Kubernetes has no ambient
    # capabilities for non-root).
    context: dict[str, Any] = {"runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": False}
    if inputs.access.privileged:
        # Every capability and an open device cgroup: the MIG config capability, and the cap
        # minors of instances created after the container started. The API server refuses
        # allowPrivilegeEscalation: false together with privileged, and the runtime ignores
        # capabilities for a privileged container, so neither is written.
        context["privileged"] = True
    else:
        context.update({
            "privileged": False,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": [c.name for c in inputs.capabilities]},
            # The runtime's default AppArmor profile (containerd's and CRI-O's, from moby's
            # template) allows ptrace reads and signals only to peers under that same profile.
            # Host processes run unconfined, so the drain could not read their /proc/<pid>/fd,
            # maps and exe (ptrace_may_access -> apparmor_ptrace_access_check): every scan would
            # fail closed and no device would ever be released on an AppArmor node (Ubuntu nodes
            # of AKS, EKS and GKE); nor could it signal a tenant under another profile. A privileged
            # container is unconfined already. (GA field since 1.30; Pod Security ``privileged``.)
            "appArmorProfile": {"type": "Unconfined"},
        })
        if inputs.se_linux_type:
            # The SELinux counterpart: as container_t (the runtimes' default domain) the agent may not
            # ptrace-read or signal host processes or other containers' (MCS categories), so every scan
            # fails closed on SELinux nodes (OpenShift, RHEL/Fedora CoreOS, Bottlerocket). The runtime
            # applies the type only where SELinux is enabled: go-selinux's label.InitLabels, which
            # containerd and CRI-O call with these options, returns no label otherwise.
            context["seLinuxOptions"] = {"type": inputs.se_linux_type}
    context.update({"readOnlyRootFilesystem": True, "seccompProfile": {"type": "RuntimeDefault"}})
    return context


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
        # What the bootstrap checks the mounted zipapp and config against.
        {"name": RUNTIME_SHA_ENV, "value": inputs.runtime_sha256},
        {"name": CONFIG_SHA_ENV, "value": inputs.config_sha256},
        # The NVIDIA container runtime injects the driver's devices and user-space libraries.
        *({"name": k, "value": v} for k, v in inputs.access.env),
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
        },
        "securityContext": _security_context(inputs),
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
        "volumes": [
            {"name": "runtime", "configMap": {"name": inputs.config_map_name, "defaultMode": 0o444}},
            *({"name": name, "hostPath": {"path": path, "type": "DirectoryOrCreate"}} for name, path in paths.items()),
            {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
        ],
    }
    if inputs.access.runtime_class_name:
        spec["runtimeClassName"] = inputs.access.runtime_class_name
    if inputs.priority_class_name:
        spec["priorityClassName"] = inputs.priority_class_name
    if inputs.node_selector:
        spec["nodeSelector"] = dict(inputs.node_selector)
    if inputs.tolerations:
        spec["tolerations"] = [dict(t) for t in inputs.tolerations]
    return spec
