"""What the sanitizer agent's pod needs, as plain data: RBAC rules, capabilities, pod spec.

Pure Python (no cdk8s): :mod:`.construct` turns these into API objects, and tests and docs read
them directly. Every privilege carries the reason the agent needs it; the construct writes the
reasons into the manifests (checkov suppressions) and ``docs/sanitizer-construct.md`` lists them.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dra_constructs.agent.config import AgentConfig
from dra_constructs.catalog import DEVICE_CLASS_GPU, DEVICE_CLASS_MIG, DEVICE_CLASS_SELECTORS
from dra_constructs.target import Target

__all__ = [
    "AGENT_CONTAINER",
    "CLAIM_NAME",
    "COMPONENT_LABEL",
    "COMPONENT_VALUE",
    "CONFIG_FILE",
    "DEFAULT_NODE_SELECTOR",
    "DEFAULT_NODE_TOLERATIONS",
    "NVIDIA_HEALTH_TAINT_KEYS",
    "RUNTIME_DIR",
    "ZIPAPP_FILE",
    "Capability",
    "Rule",
    "agent_capabilities",
    "agent_rules",
    "device_class_selector",
    "device_tolerations",
    "host_paths",
]

#: The label the guardrails use to recognise the sanitizer DaemonSet (exact key and value).
COMPONENT_LABEL = "dra-constructs.io/component"
COMPONENT_VALUE = "sanitizer"

AGENT_CONTAINER = "agent"
#: Name of the admin-access claim in the pod (``spec.resourceClaims[].name``).
CLAIM_NAME = "node-gpus"
#: Where the ConfigMap with the runtime (zipapp) and its configuration is mounted.
RUNTIME_DIR = "/opt/dra-sanitizer"
ZIPAPP_FILE = "agent.pyz"
CONFIG_FILE = "config.yaml"

#: GPU nodes: the label NVIDIA GPU feature discovery / the GPU Operator puts on them.
DEFAULT_NODE_SELECTOR: Mapping[str, str] = {"nvidia.com/gpu.present": "true"}
#: The usual GPU node taint (any value, any effect), as cloud GPU node pools set it.
DEFAULT_NODE_TOLERATIONS: tuple[Mapping[str, Any], ...] = ({"key": "nvidia.com/gpu", "operator": "Exists"},)
#: Device taints the NVIDIA DRA driver publishes from its health checks (gpu-sanitization.md §4):
#: the agent must keep its access to unhealthy devices (to quarantine them, to see their state).
NVIDIA_HEALTH_TAINT_KEYS: tuple[str, ...] = ("gpu.nvidia.com/xid", "gpu.nvidia.com/gpu-lost",
                                             "gpu.nvidia.com/unmonitored")


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

    ``config`` is the hook for configuration-dependent capabilities; today every configuration
    needs the same two.
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
    return caps


def device_class_selector() -> str:
    """CEL of the agent's DeviceClass: every device of the NVIDIA GPU and MIG classes.

    One request over one class, not one request per class: with ``allocationMode: All`` a
    request needs at least one matching device on the node (1.33+), and the NVIDIA driver
    publishes a MIG-enabled GPU only as its MIG devices, so a node with whole GPUs only has no
    ``mig.nvidia.com`` device and a node with MIG only has no ``gpu.nvidia.com`` device.
    """
    gpu, mig = DEVICE_CLASS_SELECTORS[DEVICE_CLASS_GPU], DEVICE_CLASS_SELECTORS[DEVICE_CLASS_MIG]
    return f"({gpu}) || ({mig})"


def device_tolerations(config: AgentConfig, extra_keys: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Device tolerations of the admin claim: its own guard/quarantine taint and the driver's.

    Admin access is not exempt from device taints (device-taints concept page): without these
    the agent's own ``NoExecute`` quarantine would evict it, and a restarted agent could not
    get the quarantined devices back.
    """
    keys = [config.taint_key, *NVIDIA_HEALTH_TAINT_KEYS, *extra_keys]
    return [{"key": key, "operator": "Exists"} for key in dict.fromkeys(keys)]


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
