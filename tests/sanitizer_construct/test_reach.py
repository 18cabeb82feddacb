"""Reach: on the catalog's densest node shapes the agent's pod runs and sees every published device.

Two halves, per shape:

1. the DaemonSet's pod has nothing the scheduler's allocator must satisfy (no claim), and the
   project's allocator port (``fit``) agrees: the shipped manifests place on that node;
2. the agent, started as on a node (``build_runtime``, real pynvml) against the stand-in NVML
   configured as that node (8 GPUs, every GPU cut into its densest MIG profile, or whole GPUs),
   enumerates every device name the catalog's ResourceSlices publish for the node.

The stand-in answers as ``nvml.h`` documents the MIG enumeration calls
(``nvmlDeviceGetMaxMigDeviceCount``, ``nvmlDeviceGetMigDeviceHandleByIndex``,
``nvmlDeviceGetGpuInstanceProfileInfo``; see tests/sanitizer_runtime/standin/nvml.c); the names
come from the agent's own naming of what NVML returns, not from the catalog.

``SHAPES`` is the list to extend (DynamicMIG shapes: a ``NodeShape`` with ``mig_mode="dynamic"``
and its stand-in GPUs, see ``standin_gpus``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sanitizer_runtime.standin import CI, GI, GI_1_SLICE, GPU, MiB, Node
from sanitizer_runtime.standin import build as build_standin

from dra_constructs.catalog import DRIVER, GPU_SPECS
from dra_constructs.catalog.devices import catalog_resource_slices

from .helpers import build

#: NVML GPU-instance profile index of each densest-profile id the catalog uses (nvml.h
#: ``NVML_GPU_INSTANCE_PROFILE_1_SLICE`` = 0x0 is profile id 19 on A100/H100/H200/B200).
_PROFILE_INDEX = {19: GI_1_SLICE}
#: Marketing names NVML returns for the models (``nvmlDeviceGetName``) and their SM architecture.
_NVML_NAMES = {"A100_40GB": ("NVIDIA A100-SXM4-40GB", 80), "A100_80GB": ("NVIDIA A100-SXM4-80GB", 80),
               "H100_80GB": ("NVIDIA H100 80GB HBM3", 90), "H200_141GB": ("NVIDIA H200", 90),
               "B200_180GB": ("NVIDIA B200", 100)}
GPUS_PER_NODE = 8


@dataclass(frozen=True)
class NodeShape:
    """One catalog node: a GPU model, whole (``profile=None``) or cut into one MIG profile."""

    model: str
    profile: str | None = None
    mig_mode: str = "static"

    @property
    def spec(self) -> Any:
        return next(s for s in GPU_SPECS if s.key == self.model)

    @property
    def node(self) -> str:
        base = f"catalog-{self.model.lower().replace('_', '-')}"
        if self.profile is None or self.mig_mode == "dynamic":
            return base
        part = next(p for p in self.spec.mig_profiles if p.name == self.profile).device_name_part
        return f"{base}-{part}"

    @property
    def daemonset_mig_mode(self) -> str:
        return "off" if self.profile is None and self.mig_mode == "static" else self.mig_mode

    def published(self) -> set[str]:
        """Device names the catalog's ResourceSlices publish for this node (NVIDIA driver only)."""
        slices = catalog_resource_slices([self.model], gpus_per_node=GPUS_PER_NODE, mig_mode=self.mig_mode)  # type: ignore[arg-type]
        return {d["name"] for s in slices if s["spec"]["nodeName"] == self.node and s["spec"]["driver"] == DRIVER
                for d in s["spec"].get("devices", [])}

    def standin_gpus(self) -> list[GPU]:
        """The stand-in driver's view of this node."""
        name, arch = _NVML_NAMES[self.model]
        total = self.spec.memory_mib * MiB
        if self.mig_mode != "static":
            raise NotImplementedError("DynamicMIG shapes: describe every placement as GI(present=False)")
        if self.profile is None:
            return [GPU(f"GPU-{self.model}-{m}", minor=m, name=name, arch=arch, total=total)
                    for m in range(GPUS_PER_NODE)]
        profile = next(p for p in self.spec.mig_profiles if p.name == self.profile)
        return [
            GPU(f"GPU-{self.model}-{m}", minor=m, name=name, arch=arch, mig=True, total=total, gis=[
                GI(i + 1, [CI(f"MIG-{self.model}-{m}-{i}")], _PROFILE_INDEX[profile.profile_id],
                   profile_id=profile.profile_id, slices=profile.memory_slices, placement_start=start,
                   placement_size=profile.memory_slices, memory_mb=profile.memory_mib, total=4 * MiB,
                   reserved=1 * MiB)
                for i, start in enumerate(profile.placements[:profile.max_count])
            ])
            for m in range(GPUS_PER_NODE)
        ]


#: The densest shapes: 8 x 7 MIG 1g (56 devices, beyond a claim's 32 results) and whole GPUs.
SHAPES: list[NodeShape] = [
    NodeShape("H100_80GB", "1g.10gb"),
    NodeShape("H200_141GB", "1g.18gb"),
    NodeShape("A100_80GB", "1g.10gb"),
    NodeShape("A100_40GB", "1g.5gb"),
    NodeShape("H100_80GB"),
]


def _id(shape: NodeShape) -> str:
    return shape.node.removeprefix("catalog-")


@pytest.fixture(scope="module")
def standin_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_standin(tmp_path_factory.mktemp("standin-lib"))


_ENUMERATE = """
import json, sys
from pathlib import Path
from tests.sanitizer_runtime.standin import preload_nvml
preload_nvml(Path(sys.argv[1]))
from dra_constructs.agent.config import AgentConfig, KubeSettings
from dra_constructs.agent.runtime import build_runtime
config = AgentConfig(node_name=sys.argv[3], backend="nvml", dynamic_mig=sys.argv[4] == "dynamic",
                     state_dir=sys.argv[2] + "/state", evidence_file=sys.argv[2] + "/evidence.jsonl",
                     kube=KubeSettings(mode="disabled", kubernetes_version="1.34"))
rt = build_runtime(config, fsync=False)
print(json.dumps(sorted(rt.barrier.deps.inventory)))
"""


def test_the_dense_shapes_exceed_what_one_claim_can_hold() -> None:
    """The premise: a claim holds at most 32 results (AllocationResultsMaxSize), these nodes publish 56."""
    assert max(len(s.published()) for s in SHAPES) == 56


@pytest.mark.parametrize("shape", SHAPES, ids=_id)
def test_the_agent_pod_needs_no_allocation_on_the_node(shape: NodeShape) -> None:
    _, docs = build("1.34", mig_mode=shape.daemonset_mig_mode)
    pod = next(d for d in docs if d["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    assert "resourceClaims" not in pod and not any("claims" in c["resources"] for c in pod["containers"])
    # The allocator port on the shipped objects and this node's slices: no claim to satisfy, the node fits.
    from dra_constructs.fit import collect, fit
    from dra_constructs.fit.model import Inventory
    from dra_constructs.target import Target

    slices = catalog_resource_slices([shape.model], gpus_per_node=GPUS_PER_NODE, mig_mode=shape.mig_mode)  # type: ignore[arg-type]
    inputs = collect(docs, slices, [])
    assert inputs.claims == []
    report = fit(inputs.claims, Inventory.from_slices(inputs.slices, inputs.nodes, inputs.taint_rules),
                 target=Target.parse("1.34"), nodes=[shape.node])
    assert list(report.nodes) == [shape.node] and report.allocatable


@pytest.mark.parametrize("shape", SHAPES, ids=_id)
def test_the_agent_enumerates_every_published_device(shape: NodeShape, standin_lib: Path, tmp_path: Path) -> None:
    node = Node(tmp_path / "node", standin_lib, shape.standin_gpus()).write()
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", _ENUMERATE, str(standin_lib), str(tmp_path), shape.node, shape.mig_mode],
        capture_output=True, text=True, timeout=120, cwd=root, env={**os.environ, **node.env()}, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    inventory = set(json.loads(result.stdout.strip().splitlines()[-1]))
    published = shape.published()
    assert published, f"the catalog publishes nothing for {shape.node}"
    assert published <= inventory, f"published but not sanitized: {sorted(published - inventory)[:8]}"
    assert inventory == published, f"enumerated but not published: {sorted(inventory - published)[:8]}"
