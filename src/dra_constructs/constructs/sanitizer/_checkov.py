"""checkov suppressions for the agent's DaemonSet, each with the reason the agent needs it.

checkov reads ``checkov.io/skip<N>: <CHECK_ID>=<justification>`` annotations on the object it
scans. Only checks the agent fails *by design* are listed, and only those the rendered pod
really fails (derived from its capabilities and whether it is privileged). An image without a
digest is *not* suppressed: CKV_K8S_43 then fails, as it should. A test runs checkov with and
without these annotations and checks that each suppression matches a real finding.
``docs/sanitizer-construct.md`` repeats the list.
"""

from __future__ import annotations

from collections.abc import Sequence

from dra_constructs.constructs.sanitizer._agent_spec import Capability

__all__ = ["PRIVILEGED_SUPPRESSIONS", "SUPPRESSIONS", "checkov_skips", "justification", "suppressed_checks"]

#: check id -> justification (short: it travels in an annotation; checkov splits it on "=", so
#: the text must not contain one).
SUPPRESSIONS: dict[str, str] = {
    "CKV_K8S_17": "hostPID: NVML lists only PIDs visible in the caller's PID namespace; the agent must see "
                  "and signal tenant processes",
    "CKV_K8S_23": "runs as root: NVML privileged controls and signalling tenants need uid 0 plus the added "
                  "capabilities (no ambient capabilities for non-root in Kubernetes)",
    "CKV_K8S_40": "runs as uid 0 (see CKV_K8S_23); a high UID would lose the added capabilities",
    "CKV_K8S_38": "the agent calls the API server (watch claims and pods, device taints) with its "
                  "least-privilege service account",
    "CKV_K8S_25": "all capabilities dropped except KILL (drain signals to tenant processes), SYS_ADMIN "
                  "(NVML compute mode) and SYS_PTRACE (reading /proc/<pid>/fd: who holds the GPU's nodes)",
    "CKV_K8S_39": "SYS_ADMIN: nvmlDeviceSetComputeMode (guard, fill, release, quarantine) is gated by the "
                  "NVIDIA driver on capable(CAP_SYS_ADMIN)",
}
#: Checks a privileged pod fails (MIG on, or partition_reset mig-instance), with the same reason.
_PRIVILEGED = ("the agent creates and destroys MIG instances: that needs the MIG config capability and the "
               "capability minors of instances made after the container started (docs/sanitizer-construct.md)")
#: The same checks on an AMD node (``vendor="amd"``), where the reason is the device nodes and sysfs.
_AMD_PRIVILEGED = ("AMD: the HIP worker opens /dev/kfd and any partition's render node, and the cleaner shader "
                   "is run through sysfs, read-only unless privileged (docs/sanitizer-construct.md)")
PRIVILEGED_SUPPRESSIONS: dict[str, str] = {
    "CKV_K8S_16": "privileged: " + _PRIVILEGED,
    "CKV_K8S_20": "privileged pods escalate by definition (the API server refuses allowPrivilegeEscalation "
                  "false with privileged): " + _PRIVILEGED,
    "CKV_K8S_28": "privileged: every capability, NET_RAW included, and none can be dropped: " + _PRIVILEGED,
    "CKV_K8S_37": "privileged: capabilities are not restricted (the runtime ignores them): " + _PRIVILEGED,
}


def suppressed_checks(capabilities: Sequence[Capability], privileged: bool = False) -> list[str]:
    """The check ids suppressed for this configuration, in a stable order."""
    names = {c.name for c in capabilities}
    checks = ["CKV_K8S_17", "CKV_K8S_23", "CKV_K8S_40", "CKV_K8S_38"]
    if privileged:
        return checks + list(PRIVILEGED_SUPPRESSIONS)
    if names:
        checks.append("CKV_K8S_25")
    if "SYS_ADMIN" in names:
        checks.append("CKV_K8S_39")
    return checks


def justification(check: str, vendor: str = "nvidia") -> str:
    """The written reason of one suppressed check."""
    if vendor == "amd" and check in PRIVILEGED_SUPPRESSIONS:
        return PRIVILEGED_SUPPRESSIONS[check].replace(_PRIVILEGED, _AMD_PRIVILEGED)
    if vendor == "amd" and check == "CKV_K8S_17":
        return "hostPID: amd-smi lists the KFD's host PIDs; the agent must see and signal tenant processes"
    return PRIVILEGED_SUPPRESSIONS.get(check) or SUPPRESSIONS[check]


def checkov_skips(capabilities: Sequence[Capability], privileged: bool = False,
                  vendor: str = "nvidia") -> dict[str, str]:
    """The ``checkov.io/skip<N>`` annotations."""
    return {
        f"checkov.io/skip{i}": f"{check}={justification(check, vendor)}"
        for i, check in enumerate(suppressed_checks(capabilities, privileged), start=1)
    }
