"""The unprivileged sanitizer DaemonSet (whole GPUs, no MIG management) on real API servers.

dist/ holds only privileged sanitizers (its examples manage MIG), so ``test_dist_dry_run`` never sends
the unprivileged pod: its ``appArmorProfile: Unconfined`` and ``seLinuxOptions.type: spc_t`` (the
runtimes' default AppArmor profile and SELinux domain ``container_t`` would refuse the drain's reads of
host processes) must pass validation and the namespace's Pod Security admission (``privileged``; Pod
Security enforces on Pods, so the DaemonSet's pod template goes as a Pod too; ``baseline`` refuses
Unconfined and spc_t, which the last check shows is really evaluated).
"""

from __future__ import annotations

from typing import Any

import pytest
from sanitizer_construct.helpers import agent_container, build, one

from .apiclient import ApiFailure
from .cluster_access import Cluster, cluster, cluster_134  # noqa: F401 - fixtures

pytestmark = pytest.mark.controlplane

STRICT = {"dryRun": "All", "fieldValidation": "Strict"}
#: The GPU Operator's RuntimeClass the pod names (the RuntimeClass admission refuses a Pod without it).
RUNTIME_CLASS = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"},
                 "handler": "nvidia"}


def _send(target: Cluster) -> None:
    _, docs = build(str(target.target), mig_mode="off")
    security = agent_container(docs)["securityContext"]
    assert security["appArmorProfile"] == {"type": "Unconfined"} and security["seLinuxOptions"] == {"type": "spc_t"}
    namespace = one(docs, "Namespace")  # the sanitizer's own: Pod Security privileged admits spc_t
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    target.admin.create(namespace, exist_ok=True)
    target.admin.create(one(docs, "ServiceAccount"), exist_ok=True)
    target.admin.create(RUNTIME_CLASS, exist_ok=True)
    daemonset = one(docs, "DaemonSet")
    target.admin.create(daemonset, params=STRICT)
    target.admin.create(_pod_of(daemonset), params=STRICT)


def _pod_of(daemonset: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    """The DaemonSet's pod as the controller would create it (Pod Security's enforce mode sees Pods)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "agent-probe", "namespace": namespace or daemonset["metadata"]["namespace"]},
            "spec": daemonset["spec"]["template"]["spec"]}


@pytest.mark.xdist_group("kcp-1.37")
def test_the_unprivileged_agent_pod_is_accepted_on_1_37(cluster: Cluster) -> None:  # noqa: F811
    _send(cluster)


@pytest.mark.xdist_group("kcp-1.34")
def test_the_unprivileged_agent_pod_is_accepted_on_1_34(cluster_134: Cluster) -> None:  # noqa: F811
    _send(cluster_134)


@pytest.mark.xdist_group("kcp-1.37")
def test_pod_security_baseline_refuses_it(cluster: Cluster) -> None:  # noqa: F811
    _, docs = build(str(cluster.target), mig_mode="off")
    namespace: dict[str, Any] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "sanitizer-baseline", "labels": {"pod-security.kubernetes.io/enforce": "baseline"}}}
    cluster.admin.create(namespace, exist_ok=True)
    cluster.admin.create(RUNTIME_CLASS, exist_ok=True)
    account = one(docs, "ServiceAccount")
    cluster.admin.create({**account, "metadata": {**account["metadata"], "namespace": "sanitizer-baseline"}},
                         exist_ok=True)
    with pytest.raises(ApiFailure) as refused:
        cluster.admin.create(_pod_of(one(docs, "DaemonSet"), "sanitizer-baseline"), params=STRICT)
    message = str(refused.value.body.get("message"))
    assert refused.value.status == 403 and "forbidden AppArmor profile" in message, message
    # baseline allows only container_t, container_init_t, container_kvm_t (and container_engine_t from 1.31)
    assert 'forbidden securityContext.seLinuxOptions: type "spc_t"' in message, message
