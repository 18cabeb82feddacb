"""A Deployment whose pods each take one whole Hopper GPU (H100 80GB or H200)."""

from __future__ import annotations

import cdk8s
import constructs

from dra_constructs import Container, GpuClaimTemplate, GpuDeployment, GpuModel


def build(scope: constructs.Construct) -> cdk8s.Chart:
    """Each replica gets its own claim (from the template) for one H100 80GB or H200 GPU."""
    chart = cdk8s.Chart(scope, "whole-gpu-serving", namespace="serving")
    gpu = GpuClaimTemplate.whole_gpus(
        chart, "hopper-gpu", count=1, models=[GpuModel.H100_80GB, GpuModel.H200_141GB],
        min_compute_capability="9.0",
    )
    GpuDeployment(
        chart,
        "vllm",
        replicas=3,
        containers=[
            Container(
                name="vllm",
                image="vllm/vllm-openai:v0.6.3",
                args=("--model", "/models/llama", "--tensor-parallel-size", "1"),
                requests={"cpu": "8", "memory": "64Gi"},
                ports=(8000,),
                claims=(gpu.use(),),
            )
        ],
        pod_labels={"app.kubernetes.io/name": "vllm"},
    )
    return chart


if __name__ == "__main__":
    app = cdk8s.App()
    build(app)
    app.synth()
