"""checkov suppressions for the agent's DaemonSet, each with the reason the agent needs it.

checkov reads ``checkov.io/skip<N>: <CHECK_ID>=<justification>`` annotations on the object it
scans. Only checks the agent fails *by design* are listed, and only those the rendered pod
really fails (derived from its capabilities). An image without a
digest is *not* suppressed: CKV_K8S_43 then fails, as it should. A test runs checkov with and
without these annotations and checks that each suppression matches a real finding.
``docs/sanitizer-construct.md`` repeats the list.
"""

from __future__ import annotations

from collections.abc import Sequence

from dra_constructs.constructs.sanitizer._agent_spec import Capability

__all__ = ["SUPPRESSIONS", "checkov_skips", "suppressed_checks"]

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
    "CKV_K8S_25": "all capabilities dropped except KILL (drain signals to tenant processes) and SYS_ADMIN "
                  "(NVML compute mode)",
    "CKV_K8S_39": "SYS_ADMIN: nvmlDeviceSetComputeMode (guard, fill, release, quarantine) is gated by the "
                  "NVIDIA driver on capable(CAP_SYS_ADMIN)",
}


def suppressed_checks(capabilities: Sequence[Capability]) -> list[str]:
    """The check ids suppressed for this configuration, in a stable order."""
    names = {c.name for c in capabilities}
    checks = ["CKV_K8S_17", "CKV_K8S_23", "CKV_K8S_40", "CKV_K8S_38"]
    if names:
        checks.append("CKV_K8S_25")
    if "SYS_ADMIN" in names:
        checks.append("CKV_K8S_39")
    return checks


def checkov_skips(capabilities: Sequence[Capability]) -> dict[str, str]:
    """The ``checkov.io/skip<N>`` annotations."""
    return {
        f"checkov.io/skip{i}": f"{check}={SUPPRESSIONS[check]}"
        for i, check in enumerate(suppressed_checks(capabilities), start=1)
    }
