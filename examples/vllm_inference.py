"""vLLM on one MIG slice: a cdk8s-plus-28 Deployment + Service with a DRA claim attached.

cdk8s-plus models the pod (secret-backed ``HF_TOKEN``, readiness probe, in-memory ``/dev/shm``,
a PVC model cache, the Service); ``attach_claims`` adds the claim its 1.28 schema would drop.
"""

from __future__ import annotations

import cdk8s
import cdk8s_plus_28 as kplus
import constructs

from dra_constructs import GpuClaimTemplate, GpuModel, attach_claims


def build(scope: constructs.Construct) -> cdk8s.Chart:
    """A 2-replica vLLM server, each replica on its own A100 80GB 3g.40gb slice."""
    chart = cdk8s.Chart(scope, "vllm-inference", namespace="inference")
    slice_ = GpuClaimTemplate.mig(chart, "llm-slice", gpu=GpuModel.A100_80GB, profile="3g.40gb")

    hf_token = kplus.Secret.from_secret_name(chart, "hf-token", "hf-token")
    cache = kplus.PersistentVolumeClaim(
        chart, "model-cache", storage=cdk8s.Size.gibibytes(200),
        access_modes=[kplus.PersistentVolumeAccessMode.READ_WRITE_MANY],
    )
    deployment = kplus.Deployment(
        chart, "vllm",
        replicas=2,
        # No surge: a new replica would wait for a free slice that only the old replica holds.
        strategy=kplus.DeploymentStrategy.rolling_update(
            max_surge=kplus.PercentOrAbsolute.absolute(0), max_unavailable=kplus.PercentOrAbsolute.absolute(1)),
        termination_grace_period=cdk8s.Duration.seconds(120),
        security_context=kplus.PodSecurityContextProps(user=1000, group=1000, fs_group=1000),
        containers=[kplus.ContainerProps(
            name="vllm",
            image="vllm/vllm-openai:v0.6.3",
            args=["--model", "meta-llama/Llama-3.1-8B-Instruct", "--download-dir", "/models",
                  "--gpu-memory-utilization", "0.9", "--port", "8000"],
            port_number=8000,
            env_variables={
                "HF_TOKEN": kplus.EnvValue.from_secret_value(kplus.SecretValue(secret=hf_token, key="token")),
                "HF_HOME": kplus.EnvValue.from_value("/models/hf"),
            },
            readiness=kplus.Probe.from_http_get("/health", port=8000,
                                                initial_delay_seconds=cdk8s.Duration.seconds(30),
                                                period_seconds=cdk8s.Duration.seconds(10)),
            # Loading weights takes minutes: cdk8s-plus's default startup probe (3 x 10 s) would kill it.
            startup=kplus.Probe.from_tcp_socket(port=8000, failure_threshold=60,
                                                period_seconds=cdk8s.Duration.seconds(10)),
            lifecycle=kplus.ContainerLifecycle(pre_stop=kplus.Handler.from_command(["sleep", "5"])),
            resources=kplus.ContainerResources(
                cpu=kplus.CpuResources(request=kplus.Cpu.units(8)),
                memory=kplus.MemoryResources(request=cdk8s.Size.gibibytes(48), limit=cdk8s.Size.gibibytes(64)),
            ),
            security_context=kplus.ContainerSecurityContextProps(read_only_root_filesystem=False),
            volume_mounts=[
                kplus.VolumeMount(path="/dev/shm", volume=kplus.Volume.from_empty_dir(
                    chart, "shm", "shm", medium=kplus.EmptyDirMedium.MEMORY, size_limit=cdk8s.Size.gibibytes(16))),
                kplus.VolumeMount(path="/models", volume=kplus.Volume.from_persistent_volume_claim(
                    chart, "cache", cache)),
            ],
        )],
    )
    attach_claims(deployment, {"vllm": [slice_.use()]})
    deployment.expose_via_service(ports=[kplus.ServicePort(port=80, target_port=8000)])
    return chart


if __name__ == "__main__":
    app = cdk8s.App()
    build(app)
    app.synth()
