"""Synthesize every example: for the default target (1.32) into ``$CDK8S_OUTDIR`` (default ``dist``),
and for a 1.34 target into ``$CDK8S_OUTDIR/k8s-1.34``. ``cdk8s synth`` runs this (see cdk8s.yaml)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import cdk8s

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mig_inference_pod
import multi_slice_training_job
import whole_gpu_deployment

from dra_constructs import set_kubernetes_version

EXAMPLES = (mig_inference_pod, multi_slice_training_job, whole_gpu_deployment)
TARGETS = {"1.32": "", "1.34": "k8s-1.34"}


def main() -> None:
    """One App per target version; each example adds its charts."""
    outdir = Path(os.environ.get("CDK8S_OUTDIR", "dist"))
    for version, subdir in TARGETS.items():
        app = cdk8s.App(outdir=str(outdir / subdir) if subdir else str(outdir))
        set_kubernetes_version(app, version)
        for example in EXAMPLES:
            example.build(app)
        app.synth()


if __name__ == "__main__":
    main()
