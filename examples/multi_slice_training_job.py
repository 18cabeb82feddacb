"""A training Job on two H200 3g.71gb MIG slices of the same physical GPU."""

from __future__ import annotations

import cdk8s
import constructs

from dra_constructs import Container, GpuClaimTemplate, GpuJob, GpuModel, MatchAttribute, MigRequest, PreStop


def build(scope: constructs.Construct) -> cdk8s.Chart:
    """Two slices (one request, count 2) constrained to one parent GPU, used by one trainer."""
    chart = cdk8s.Chart(scope, "mig-training", namespace="research")
    slices = GpuClaimTemplate(
        chart,
        "trainer-slices",
        requests=[MigRequest(name="slices", gpu=GpuModel.H200_141GB, profile="3g.71gb", count=2)],
        constraints=[MatchAttribute(attribute="gpu.nvidia.com/parentUUID")],
        claim_labels={"team": "research"},
    )
    GpuJob(
        chart,
        "finetune",
        completions=1,
        backoff_limit=2,
        containers=[
            Container(
                name="trainer",
                image="nvcr.io/nvidia/pytorch:24.08-py3",
                command=("torchrun", "--nproc-per-node=2", "train.py"),
                requests={"cpu": "8", "memory": "64Gi"},
                claims=(slices.use("slices"),),
            )
        ],
        termination_grace_period_seconds=300,
        pre_stop=PreStop(command=("/bin/sh", "-c", "touch /tmp/checkpoint-now && sleep 30")),
    )
    return chart


if __name__ == "__main__":
    app = cdk8s.App()
    build(app)
    app.synth()
