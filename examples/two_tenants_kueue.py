"""Two tenants share one H100 node through MIG only: quotas, Kueue queues, admission scope, sanitizer.

The H100 is partitioned 3g.40gb + 4 x 1g.10gb (7 compute and 8 memory slices: the whole GPU).
``team-a`` may hold the 3g.40gb slice, ``team-b`` the four 1g.10gb slices. Each tenant gets a
Namespace, a ResourceQuota on its per-profile DeviceClass (the driver's own classes closed at 0),
a ClusterQueue in the shared cohort with a LocalQueue in its namespace, the guardrails admission
policy and a DeviceClass allow-list bound to its namespace. The sanitizer drains, zero-fills and
verifies every slice between tenants. Kueue's DRA integration needs Kubernetes 1.34+.
"""

from __future__ import annotations

import cdk8s
import constructs

from dra_constructs import Container, GpuDeployment, GpuModel
from dra_constructs.agent.config import AgentConfig, QuarantinePolicy
from dra_constructs.constructs.sanitizer.construct import SanitizerDaemonSet
from dra_constructs.tenants import GpuTenant, KueueQueue, Mig, TenantPlatform

#: Oldest target this example is synthesized for (Kueue's DRA integration needs resource.k8s.io/v1).
MIN_KUBERNETES_VERSION = "1.34"

SANITIZER_IMAGE = "registry.example.com/platform/dra-sanitizer-base:0.1.0"
SANITIZER_IMAGE_DIGEST = "sha256:4f5b2c1d9e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c"

SERVING = Mig(GpuModel.H100_80GB, "3g.40gb")
EMBEDDING = Mig(GpuModel.H100_80GB, "1g.10gb")


def _queue(cpu: str, memory: str) -> KueueQueue:
    # Kueue checks every resource a workload requests against its ClusterQueue by default.
    return KueueQueue(cohort="h100-mig", other_quotas={"cpu": cpu, "memory": memory})


def build(scope: constructs.Construct) -> list[cdk8s.Chart]:
    """The platform and tenants chart, one workloads chart per tenant, the sanitizer chart."""
    platform = cdk8s.Chart(scope, "gpu-platform")
    shared = TenantPlatform(platform, "tenants",
                            flavor="h100-mig", flavor_node_labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    team_a = GpuTenant(platform, "team-a", quotas={SERVING: 1}, kueue=_queue("8", "64Gi"), platform=shared)
    team_b = GpuTenant(platform, "team-b", quotas={EMBEDDING: 4}, kueue=_queue("16", "64Gi"), platform=shared)

    apps_a = cdk8s.Chart(scope, "team-a-apps", namespace=team_a.namespace)
    serving_slice = team_a.claim_template(apps_a, "serving-slice", SERVING)
    server = GpuDeployment(
        apps_a, "llm-server", replicas=1, labels=team_a.queue_labels,
        containers=[Container(name="server", image="nvcr.io/nvidia/tritonserver:24.08-py3",
                              requests={"cpu": "4", "memory": "32Gi"}, limits={"memory": "32Gi"},
                              claims=(serving_slice.use(),))],
        termination_grace_period_seconds=90,
    )
    # The only slice of its kind: replace the pod instead of surging a second one past the quota.
    server.add_json_patch(cdk8s.JsonPatch.add("/spec/strategy", {"type": "Recreate"}))

    apps_b = cdk8s.Chart(scope, "team-b-apps", namespace=team_b.namespace)
    embedding_slice = team_b.claim_template(apps_b, "embedding-slice", EMBEDDING)
    embeddings = GpuDeployment(
        apps_b, "embeddings", replicas=4, labels=team_b.queue_labels,
        containers=[Container(name="encoder", image="nvcr.io/nvidia/tritonserver:24.08-py3",
                              requests={"cpu": "2", "memory": "8Gi"}, limits={"memory": "8Gi"},
                              claims=(embedding_slice.use(),))],
        termination_grace_period_seconds=60,
    )
    embeddings.add_json_patch(cdk8s.JsonPatch.add("/spec/strategy", {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}))

    sanitizer = cdk8s.Chart(scope, "gpu-sanitizer")
    SanitizerDaemonSet(
        sanitizer, "sanitizer", image=SANITIZER_IMAGE, image_digest=SANITIZER_IMAGE_DIGEST,
        config=AgentConfig(grace_period_s=60, drain_timeout_s=120, coverage_threshold=0.99,
                           quarantine_policy=QuarantinePolicy.TAINT_AND_PROHIBIT, taint_effect="NoSchedule"),
    )
    return [platform, apps_a, apps_b, sanitizer]


if __name__ == "__main__":
    app = cdk8s.App()
    from dra_constructs import set_kubernetes_version

    set_kubernetes_version(app, MIN_KUBERNETES_VERSION)
    build(app)
    app.synth()
