"""The residue canary through the real backends (pynvml, the CUDA worker, the verify kernel) on the
stand-in driver, both ways: residue survives the tenant's exit (scrub-on-free off, as with
``RMDisableScrubOnFree=1``) or the driver scrubs it at free (its default)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_constructs.agent import canary
from dra_constructs.agent.state import Phase

from .standin import GPU, MiB
from .test_standin_backends import MakeNode, runtime, standin  # noqa: F401 - fixture


@pytest.mark.parametrize(("scrub_on_free", "verdict"), [(True, "clean"), (False, "residue")])
def test_canary_on_the_standin(tmp_path: Path, standin: MakeNode,  # noqa: F811
                               scrub_on_free: bool, verdict: str) -> None:
    node = standin([GPU("GPU-c", minor=0, name="NVIDIA H100 80GB HBM3", total=64 * MiB)],
                   scrub_on_free=scrub_on_free, ptx_isa_max=87)
    rt = runtime(tmp_path)
    device = rt.device("gpu-0")
    assert rt.barrier.run(device, "test").result == "released"
    before = rt.barrier.deps.scrub_on_free_disabled  # the params file's answer (None: no driver here)
    record = canary.run_selftest(rt.barrier.deps, device, "selftest")
    assert record.result == verdict, record.reason
    figures = record.selftest
    assert figures is not None and figures.model == "NVIDIA H100 80GB HBM3" and figures.driver_version != "unknown"
    assert figures.bytes_written > 32 * MiB and figures.bytes_read > 32 * MiB  # nearly all, through the kernel
    assert (figures.residue_words > 0) is (verdict == "residue") and figures.other_nonzero_words == 0
    assert rt.barrier.deps.scrub_on_free_disabled is (True if verdict == "residue" else before)
    assert rt.barrier.deps.store.load(device.name).phase is Phase.CLEAN
    assert not any(node.memory(0)), "the canary's fresh context zeroes what it read"
