"""Two tenants share one MI300X node through CPX partitions: quotas, Kueue queues, admission, sanitizer.

The node's MI300X GPUs are pre-partitioned CPX/NPS4 by AMD's tooling (8 partitions of 38 CUs and
24,574 MiB each; the AMD GPU DRA driver does not re-partition). ``team-a`` may hold 4 partitions,
``team-b`` 2, each through its own per-profile DeviceClass narrowing ``gpu.amd.com``.

The sanitizer DaemonSet runs the AMD backend (``vendor="amd"``, docs/amd.md): between tenants it
drains a partition through AMD SMI, runs the cleaner shader there (LDS and registers,
CVE-2023-4969), zero-fills and verifies its memory through HIP. DRA009 counts it.
"""

from __future__ import annotations

import cdk8s
import constructs

from dra_constructs import AmdPartition, Container, GpuDeployment
from dra_constructs.agent.config import AgentConfig, QuarantinePolicy
from dra_constructs.constructs.sanitizer.construct import SanitizerDaemonSet
from dra_constructs.tenants import GpuTenant, KueueQueue, TenantPlatform

#: Oldest target this example is synthesized for (Kueue's DRA integration needs resource.k8s.io/v1).
MIN_KUBERNETES_VERSION = "1.34"

SANITIZER_IMAGE = "registry.example.com/platform/dra-sanitizer-base:0.1.0"
SANITIZER_IMAGE_DIGEST = "sha256:4f5b2c1d9e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c"

CPX = AmdPartition("MI300X", "cpx_nps4")


def _queue(cpu: str, memory: str) -> KueueQueue:
    return KueueQueue(cohort="mi300x-cpx", other_quotas={"cpu": cpu, "memory": memory})


def build(scope: constructs.Construct) -> list[cdk8s.Chart]:
    """The platform and tenants chart, one workloads chart per tenant, the sanitizer chart."""
    platform = cdk8s.Chart(scope, "gpu-platform")
    # A label your MI300X CPX/NPS4 nodes carry (set it with the partitioning, e.g. AMD's DCM profile).
    shared = TenantPlatform(platform, "tenants", flavor="mi300x-cpx",
                            flavor_node_labels={"gpu.example.com/partition-profile": "cpx_nps4"})
    team_a = GpuTenant(platform, "team-a", quotas={CPX: 4}, kueue=_queue("16", "128Gi"), platform=shared)
    team_b = GpuTenant(platform, "team-b", quotas={CPX: 2}, kueue=_queue("8", "64Gi"), platform=shared)

    charts = [platform]
    for tenant, replicas, image in ((team_a, 4, "rocm/vllm:rocm6.4.1_vllm_0.9.1"),
                                    (team_b, 2, "rocm/pytorch:rocm6.4.1_ubuntu22.04_py3.10_pytorch_2.6.0")):
        apps = cdk8s.Chart(scope, f"{tenant.namespace}-apps", namespace=tenant.namespace)
        partition = tenant.claim_template(apps, "cpx-partition", CPX)
        GpuDeployment(
            apps, "server", replicas=replicas, labels=tenant.queue_labels,
            containers=[Container(name="server", image=image, requests={"cpu": "2", "memory": "16Gi"},
                                  limits={"memory": "16Gi"}, claims=(partition.use(),))],
            termination_grace_period_seconds=60,
        )
        charts.append(apps)

    sanitizer = cdk8s.Chart(scope, "gpu-sanitizer")
    SanitizerDaemonSet(
        sanitizer, "sanitizer", image=SANITIZER_IMAGE, image_digest=SANITIZER_IMAGE_DIGEST, vendor="amd",
        config=AgentConfig(grace_period_s=60, drain_timeout_s=120, coverage_threshold=0.99,
                           quarantine_policy=QuarantinePolicy.TAINT_AND_PROHIBIT, taint_effect="NoSchedule"),
    )
    return [*charts, sanitizer]


if __name__ == "__main__":
    app = cdk8s.App()
    from dra_constructs import set_kubernetes_version

    set_kubernetes_version(app, MIN_KUBERNETES_VERSION)
    build(app)
    app.synth()
