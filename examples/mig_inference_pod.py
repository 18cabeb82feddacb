"""An inference server on one MIG slice: A100 80GB, profile 3g.40gb."""

from __future__ import annotations

import cdk8s
import constructs

from dra_constructs import Container, GpuClaimTemplate, GpuModel, GpuPod


def build(scope: constructs.Construct) -> cdk8s.Chart:
    """One ResourceClaimTemplate (one 3g.40gb slice) and a Pod whose container uses it."""
    chart = cdk8s.Chart(scope, "mig-inference", namespace="inference")
    slice_template = GpuClaimTemplate.mig(chart, "llm-slice", gpu=GpuModel.A100_80GB, profile="3g.40gb")
    GpuPod(
        chart,
        "llm-server",
        containers=[
            Container(
                name="server",
                image="nvcr.io/nvidia/tritonserver:24.08-py3",
                args=("tritonserver", "--model-repository=/models"),
                requests={"cpu": "4", "memory": "32Gi"},
                limits={"memory": "32Gi"},
                ports=(8000,),
                claims=(slice_template.use(),),
            )
        ],
        termination_grace_period_seconds=120,
    )
    return chart


if __name__ == "__main__":
    app = cdk8s.App()
    build(app)
    app.synth()
