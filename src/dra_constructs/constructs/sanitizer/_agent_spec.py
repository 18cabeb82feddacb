"""What the sanitizer agent's pod needs, as plain data: RBAC rules, driver access, privileges.

Pure Python (no cdk8s): :mod:`.construct` turns these into API objects, and tests and docs read
them directly. Every privilege carries the reason the agent needs it; the construct writes the
reasons into the manifests (checkov suppressions) and ``docs/sanitizer-construct.md`` lists them.

The agent reaches the host driver the way NVIDIA's own node components do (device plugin, DCGM
exporter, MIG manager, the DRA kubelet plugin): through the NVIDIA container runtime and
``NVIDIA_VISIBLE_DEVICES=all``, not through a DRA claim. A claim with ``allocationMode: All``
holds at most 32 devices (``AllocationResultsMaxSize``), so it cannot be allocated on a node cut
into 8 x 7 MIG slices (56 devices) or on any DynamicMIG node (one device per placement).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from dra_constructs.agent.config import AgentConfig, PartitionReset
from dra_constructs.target import Target

__all__ = [
    "AGENT_CONTAINER",
    "AMD_NODE_SELECTOR",
    "AMD_NODE_TOLERATIONS",
    "COMPONENT_LABEL",
    "COMPONENT_VALUE",
    "CONFIG_FILE",
    "CONFIG_SHA_ENV",
    "DEFAULT_NODE_SELECTOR",
    "DEFAULT_NODE_TOLERATIONS",
    "DEFAULT_RUNTIME_CLASS",
    "RUNTIME_DIR",
    "RUNTIME_SHA_ENV",
    "ZIPAPP_FILE",
    "Capability",
    "DriverAccess",
    "NodeMigMode",
    "Rule",
    "agent_capabilities",
    "agent_rules",
    "amd_driver_access",
    "driver_access",
    "host_paths",
]

#: The label the guardrails use to recognise the sanitizer DaemonSet (exact key and value).
COMPONENT_LABEL = "dra-constructs.io/component"
COMPONENT_VALUE = "sanitizer"

AGENT_CONTAINER = "agent"
#: Where the ConfigMap with the runtime (zipapp) and its configuration is mounted.
RUNTIME_DIR = "/opt/dra-sanitizer"
ZIPAPP_FILE = "agent.pyz"
CONFIG_FILE = "config.yaml"
#: Env vars carrying the SHA-256 the pod template pins for each mounted file (checked before start).
RUNTIME_SHA_ENV = "DRA_SANITIZER_RUNTIME_SHA256"
CONFIG_SHA_ENV = "DRA_SANITIZER_CONFIG_SHA256"

#: GPU nodes: the label NVIDIA GPU feature discovery / the GPU Operator puts on them.
DEFAULT_NODE_SELECTOR: Mapping[str, str] = {"nvidia.com/gpu.present": "true"}
#: The usual GPU node taint (any value, any effect), as cloud GPU node pools set it.
DEFAULT_NODE_TOLERATIONS: tuple[Mapping[str, Any], ...] = ({"key": "nvidia.com/gpu", "operator": "Exists"},)
#: The RuntimeClass the GPU Operator (and ``nvidia-ctk runtime configure``) registers for the
#: NVIDIA container runtime.
DEFAULT_RUNTIME_CLASS = "nvidia"

#: AMD GPU nodes: the label the AMD GPU Operator's node-feature-discovery rule sets, and the taint
#: AMD GPU node pools usually carry (the device plugin's resource name).
AMD_NODE_SELECTOR: Mapping[str, str] = {"feature.node.kubernetes.io/amd-gpu": "true"}
AMD_NODE_TOLERATIONS: tuple[Mapping[str, Any], ...] = ({"key": "amd.com/gpu", "operator": "Exists"},)

#: MIG on the nodes: ``off`` (whole GPUs only), ``static`` (pre-created MIG devices), ``dynamic``
#: (DynamicMIG: the NVIDIA DRA driver creates an instance per prepared claim).
NodeMigMode = Literal["off", "static", "dynamic"]


@dataclass(frozen=True)
class DriverAccess:
    """How the agent's container reaches the host driver, and the privilege that takes."""

    mig_mode: NodeMigMode
    #: ``privileged: true``: the agent creates and destroys MIG GPU/compute instances.
    privileged: bool
    runtime_class_name: str | None
    #: The NVIDIA container runtime's variables (name -> value), in a stable order.
    env: tuple[tuple[str, str], ...]
    #: Why the pod is privileged (empty when it is not).
    privileged_because: tuple[str, ...]


def driver_access(config: AgentConfig, mig_mode: NodeMigMode, runtime_class_name: str | None) -> DriverAccess:
    """The container runtime variables and the privilege for this configuration and node shape.

    Privileged exactly when the agent must create or destroy MIG instances: DynamicMIG (the
    transient instance of every barrier), ``partition_reset: mig-instance``, and the MIG
    compute-instance guard, which every MIG barrier needs on drivers before CUDA 13.3 (NVML
    cannot set a compute mode on a MIG device there). Creating instances needs the MIG
    ``config`` capability, and each new instance gets capability minors
    (``/dev/nvidia-caps/nvidia-cap<N>``) that no device cgroup set up at container start allows.
    """
    reasons: list[str] = []
    if mig_mode == "dynamic":
        reasons.append("DynamicMIG: every barrier creates and destroys a transient GPU instance")
    elif mig_mode == "static":
        reasons.append("MIG: the compute-instance guard creates and destroys compute instances "
                       "(no per-MIG compute mode before CUDA 13.3)")
    if config.partition_reset == PartitionReset.MIG_INSTANCE:
        reasons.append("partition_reset mig-instance destroys and recreates the instance")
    env = [("NVIDIA_VISIBLE_DEVICES", "all"), ("NVIDIA_DRIVER_CAPABILITIES", "compute,utility")]
    if mig_mode != "off":
        # Aggregate view of every MIG device of a GPU (memory, processes): NVML lists the
        # processes of all instances only with the monitor capability.
        env.append(("NVIDIA_MIG_MONITOR_DEVICES", "all"))
    if reasons:
        env.append(("NVIDIA_MIG_CONFIG_DEVICES", "all"))
    return DriverAccess(mig_mode=mig_mode, privileged=bool(reasons), runtime_class_name=runtime_class_name,
                        env=tuple(env), privileged_because=tuple(reasons))


def amd_driver_access() -> DriverAccess:
    """AMD nodes (``backend: amd``): privileged, for the device nodes and for sysfs (docs/amd.md).

    There is no AMD counterpart of the NVIDIA container runtime's ``NVIDIA_VISIBLE_DEVICES=all``
    that hands a container every device without a claim. The HIP worker opens ``/dev/kfd`` and
    the render node of the partition it scrubs (``/dev/dri/renderD<N>``, one per compute
    partition: 64 on a node of 8 MI300X in CPX mode, beyond a claim's 32 devices, and renumbered
    when an administrator re-partitions); a container's device cgroup allows only the nodes it
    was given at start. The cleaner shader is driven through sysfs attributes
    (``enforce_isolation``, ``run_cleaner_shader``), and container runtimes mount ``/sys``
    read-only in every container that is not privileged.
    """
    return DriverAccess(mig_mode="off", privileged=True, runtime_class_name=None, env=(), privileged_because=(
        "AMD: the HIP worker opens /dev/kfd and any partition's /dev/dri/renderD<N> (no claim can hold every "
        "partition of a CPX node, and a container's device cgroup allows only the nodes it started with)",
        "AMD: enforce_isolation and run_cleaner_shader are sysfs attributes, and /sys is mounted read-only in "
        "containers that are not privileged",
    ))


@dataclass(frozen=True)
class Rule:
    """One RBAC rule and why the agent needs it."""

    api_group: str
    resource: str
    verbs: tuple[str, ...]
    why: str


def agent_rules(target: Target) -> list[Rule]:
    """Cluster-wide rules, exactly the calls of ``runtime/kube.py`` (no wildcards, no secrets).

    Events are not here: the agent creates them only in its own namespace (a namespaced Role).
    ``/version`` is a non-resource URL every authenticated user may read (``system:discovery``).
    """
    rules = [
        Rule("", "pods", ("list", "watch"),
             "find the pods on its node (fieldSelector spec.nodeName) and see them terminate"),
        Rule("resource.k8s.io", "resourceclaims", ("list", "watch"),
             "see which tenant holds which device and when a claim is deallocated"),
    ]
    if target.device_taint_rule_api_version is not None:
        rules.append(Rule(
            "resource.k8s.io", "devicetaintrules", ("get", "create", "update", "delete"),
            "guard a device while it is sanitized and quarantine it on failure "
            "(create; on conflict get + update; delete after a passed verify)",
        ))
    return rules


#: The namespaced rule (Role in the agent's namespace) for the Events it posts about its node.
EVENT_RULE = Rule("", "events", ("create",), "report barrier failures and quarantines as Events")


@dataclass(frozen=True)
class Capability:
    """A Linux capability the agent keeps (all others are dropped) and why."""

    name: str
    why: str


def agent_capabilities(config: AgentConfig) -> list[Capability]:
    """The capabilities the agent needs; everything else is dropped (``ALL``).

    ``config`` is the hook for configuration-dependent capabilities: every configuration needs
    ``KILL`` and ``SYS_ADMIN``; ``device_handles`` (the default) adds ``SYS_PTRACE``.
    """
    caps = [Capability(
        "KILL",
        "the drain sends SIGTERM, then SIGKILL after the grace period, to the tenant's processes, "
        "which run under other UIDs in other containers (hostPID); signalling another UID needs CAP_KILL",
    )]
    # Every barrier cycle changes the NVML compute mode (barrier.py: PROHIBITED as the guard,
    # EXCLUSIVE_PROCESS for its own fill context, DEFAULT at release, PROHIBITED on quarantine);
    # a device whose mode cannot go back to DEFAULT is never released, whatever the policy.
    caps.append(Capability(
        "SYS_ADMIN",
        "nvmlDeviceSetComputeMode (PROHIBITED while guarded or quarantined, EXCLUSIVE_PROCESS for the fill, "
        "DEFAULT at release) is a privileged RM control: the driver's os_is_administrator() is "
        "capable(CAP_SYS_ADMIN) (open-gpu-kernel-modules kernel-open/nvidia/os-interface.c, NV_IS_SUSER)",
    ))
    if config.device_handles:
        caps.append(Capability(
            "SYS_PTRACE",
            "the drain reads /proc/<pid>/fd of every host process (agent/devhandles.py: who holds the device's "
            "nodes beyond NVML's lists); the kernel gates it on ptrace_may_access(PTRACE_MODE_READ_FSCREDS), "
            "which needs CAP_SYS_PTRACE for processes of other UIDs (fs/proc/base.c proc_fd_access_allowed)",
        ))
    return caps


def host_paths(config: AgentConfig) -> dict[str, str]:
    """Host directories the agent writes (volume name -> path): crash-safe state and evidence.

    The evidence directory is left out when it is the state directory or inside it (one mount).
    """
    state = posixpath.normpath(config.state_dir)
    evidence = posixpath.dirname(posixpath.normpath(config.evidence_file))
    if evidence == state or evidence.startswith(state.rstrip("/") + "/"):
        return {"state": state}
    if state.startswith(evidence.rstrip("/") + "/"):
        return {"evidence": evidence}
    return {"state": state, "evidence": evidence}
