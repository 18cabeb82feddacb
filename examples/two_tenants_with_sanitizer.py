"""Two tenants share H100 GPUs through MIG slices; the sanitizer puts a barrier between them.

Tenant ``team-a`` serves a model on a 3g.40gb slice, tenant ``team-b`` runs fine-tuning on two
2g.20gb slices. When a slice leaves a tenant (pod deleted, preempted, claim deallocated) the
sanitizer agent on that node drains it, zero-fills and verifies its memory, and only then lets
the scheduler hand it to the other tenant; a failure quarantines that one slice.
"""

from __future__ import annotations

import cdk8s
import constructs

from dra_constructs import Container, GpuClaimTemplate, GpuDeployment, GpuJob, GpuModel, MigRequest, PreStop
from dra_constructs.agent.config import AgentConfig, QuarantinePolicy
from dra_constructs.constructs.sanitizer.construct import SanitizerDaemonSet

#: The agent's base image (Python + the agent's dependencies), built from
#: images/sanitizer/Dockerfile and pushed to your registry; pin it by the digest the push prints.
SANITIZER_IMAGE = "registry.example.com/platform/dra-sanitizer-base:0.1.0"
SANITIZER_IMAGE_DIGEST = "sha256:4f5b2c1d9e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c"


def build(scope: constructs.Construct) -> list[cdk8s.Chart]:
    """One chart per tenant and one for the sanitizer (its namespace, RBAC and DaemonSet)."""
    team_a = cdk8s.Chart(scope, "team-a", namespace="team-a")
    serving_slice = GpuClaimTemplate.mig(team_a, "serving-slice", gpu=GpuModel.H100_80GB, profile="3g.40gb")
    GpuDeployment(
        team_a,
        "llm-server",
        replicas=2,
        containers=[
            Container(
                name="server",
                image="nvcr.io/nvidia/tritonserver:24.08-py3",
                args=("tritonserver", "--model-repository=/models"),
                requests={"cpu": "4", "memory": "32Gi"},
                limits={"memory": "32Gi"},
                ports=(8000,),
                claims=(serving_slice.use(),),
            )
        ],
        termination_grace_period_seconds=90,
        pod_labels={"app.kubernetes.io/name": "llm-server"},
    )

    team_b = cdk8s.Chart(scope, "team-b", namespace="team-b")
    training_slices = GpuClaimTemplate(
        team_b,
        "training-slices",
        requests=[MigRequest(name="slices", gpu=GpuModel.H100_80GB, profile="2g.20gb", count=2)],
    )
    GpuJob(
        team_b,
        "finetune",
        completions=1,
        backoff_limit=1,
        containers=[
            Container(
                name="trainer",
                image="nvcr.io/nvidia/pytorch:24.08-py3",
                command=("torchrun", "--nproc-per-node=2", "train.py"),
                requests={"cpu": "8", "memory": "64Gi"},
                claims=(training_slices.use("slices"),),
            )
        ],
        termination_grace_period_seconds=300,
        pre_stop=PreStop(command=("/bin/sh", "-c", "touch /tmp/checkpoint-now && sleep 30")),
    )

    sanitizer = cdk8s.Chart(scope, "gpu-sanitizer")
    SanitizerDaemonSet(
        sanitizer,
        "sanitizer",
        image=SANITIZER_IMAGE,
        image_digest=SANITIZER_IMAGE_DIGEST,
        config=AgentConfig(
            grace_period_s=60,  # the tenants' own grace periods run first; this is the agent's drain
            drain_timeout_s=120,
            coverage_threshold=0.99,
            quarantine_policy=QuarantinePolicy.TAINT_AND_PROHIBIT,
            taint_effect="NoSchedule",
        ),
    )
    return [team_a, team_b, sanitizer]


if __name__ == "__main__":
    app = cdk8s.App()
    build(app)
    app.synth()
