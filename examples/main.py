"""Synthesize every example, each as its own App (its own manifest set, as a team would deploy it).

Default target (1.32) into ``$CDK8S_OUTDIR/<example>/`` (``CDK8S_OUTDIR`` defaults to ``dist``) and a
1.34 target into ``$CDK8S_OUTDIR/k8s-1.34/<example>/``. ``cdk8s synth`` runs this (see cdk8s.yaml).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType

import cdk8s

sys.path.insert(0, str(Path(__file__).resolve().parent))

import amd_cpx_tenants
import mig_inference_pod
import multi_slice_training_job
import topology_training
import two_tenants_kueue
import two_tenants_with_sanitizer
import vllm_inference
import whole_gpu_deployment

from dra_constructs import Target, set_kubernetes_version

EXAMPLES = (mig_inference_pod, multi_slice_training_job, whole_gpu_deployment, two_tenants_with_sanitizer,
            vllm_inference, two_tenants_kueue, topology_training, amd_cpx_tenants)
TARGETS = {"1.32": "", "1.34": "k8s-1.34"}


def targets_of(example: ModuleType) -> list[str]:
    """The targets an example is synthesized for (its ``MIN_KUBERNETES_VERSION``, if any, and newer)."""
    oldest = getattr(example, "MIN_KUBERNETES_VERSION", None)
    if oldest is None:
        return list(TARGETS)
    return [v for v in TARGETS if Target.parse(v).minor >= Target.parse(oldest).minor]


def main() -> None:
    """One App per (target version, example)."""
    outdir = Path(os.environ.get("CDK8S_OUTDIR", "dist"))
    for version, subdir in TARGETS.items():
        for example in EXAMPLES:
            if version not in targets_of(example):
                continue
            app = cdk8s.App(outdir=str(outdir / subdir / example.__name__))
            set_kubernetes_version(app, version)
            example.build(app)
            app.synth()


if __name__ == "__main__":
    main()
