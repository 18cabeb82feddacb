"""A training Job whose claim takes 4 H100s on one NUMA node and an RDMA NIC on the first GPU's PCIe root."""

from __future__ import annotations

import cdk8s
import constructs

from dra_constructs import (
    Alignment,
    Container,
    GpuClaimTemplate,
    GpuJob,
    GpuModel,
    GpuRequest,
    NicRequest,
    set_nvidia_driver_version,
)


def build(scope: constructs.Construct) -> cdk8s.Chart:
    """One claim per Pod (a template): GPU ``gpu-0`` + 3 more GPUs on its NUMA node, a NIC beside ``gpu-0``.

    A ``matchAttribute`` holds for every device of the requests it lists, so the GPUs are two
    requests: all four share ``numaNode``, only ``gpu-0`` and the NIC share ``pcieRoot`` (on an HGX
    board two GPUs sit on each root, so "all four GPUs and the NIC on one root" fits no node).
    The scheduler allocates the claim while scheduling the Pod, on the Pod's node: there is no
    WaitForFirstConsumer to set.
    """
    chart = cdk8s.Chart(scope, "topology-training", namespace="research")
    # NUMA alignment needs resource.kubernetes.io/numaNode on the GPUs: the NVIDIA DRA driver publishes
    # it only after v0.4 (main); with a released driver the claim would fit no node and is refused.
    set_nvidia_driver_version(chart, "main")
    hopper = [GpuModel.H100_80GB]
    devices = GpuClaimTemplate(
        chart,
        "trainer-devices",
        requests=[
            GpuRequest(name="gpu-0", models=hopper),
            GpuRequest(name="gpus", count=3, models=hopper),
            NicRequest(name="nic", rdma=True),
        ],
        align=[
            Alignment(on="numaNode", requests=("gpu-0", "gpus")),
            Alignment(on="pcieRoot", requests=("gpu-0", "nic")),
        ],
        claim_labels={"team": "research"},
    )
    GpuJob(
        chart,
        "pretrain",
        completions=1,
        backoff_limit=2,
        containers=[
            Container(
                name="trainer",
                image="nvcr.io/nvidia/pytorch:24.08-py3",
                command=("torchrun", "--nproc-per-node=4", "train.py"),
                requests={"cpu": "32", "memory": "256Gi"},
                claims=(devices.use(),),
            )
        ],
        termination_grace_period_seconds=300,
    )
    return chart


if __name__ == "__main__":
    app = cdk8s.App()
    build(app)
    app.synth()
