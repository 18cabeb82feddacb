"""App settings (cdk8s context) are read once per scope, in one jsii exchange (issue 25 item 4).

A construct resolves its App settings once (``app_settings``) and hands plain values to the core;
every setter drops what was read before it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import cdk8s
import pytest

from dra_constructs import (
    Alignment,
    Container,
    DraConstructsError,
    GpuClaimTemplate,
    GpuPod,
    set_dra_extended_resources,
    set_kubernetes_version,
    set_kueue_compatible,
    set_mig_mode,
    set_nvidia_driver_version,
)

from .helpers import jsii_exchanges


def _context_reads() -> AbstractContextManager[list[str]]:
    """The context methods Python invokes on Node while the block runs."""

    def context_method(request: Any) -> str | None:
        method = getattr(request, "method", None)
        return method if isinstance(method, str) and "Context" in method else None

    return jsii_exchanges(context_method)


def _app() -> cdk8s.App:
    app = cdk8s.App()
    set_kubernetes_version(app, "1.34")
    set_mig_mode(app, "static")
    set_nvidia_driver_version(app, "25.8")
    set_kueue_compatible(app, False)
    return app


def test_a_scope_reads_every_setting_in_one_exchange() -> None:
    chart = cdk8s.Chart(_app(), "c")
    with _context_reads() as reads:
        for i in range(5):  # target, MIG mode, Kueue and (with align) the driver release
            tmpl = GpuClaimTemplate.whole_gpus(chart, f"t{i}", count=2, models=["H100_80GB"],
                                                align=[Alignment(on="pcieRoot")])
            GpuPod(chart, f"p{i}", containers=[Container(name="a", image="registry.example/a:1",
                                                         claims=(tmpl.use(),))])
    assert reads == ["getAllContext"]
    assert tmpl.target.minor == 34


def test_the_nearest_scope_wins() -> None:
    app = cdk8s.App()
    set_kubernetes_version(app, "1.33")
    own = cdk8s.Chart(app, "own")
    set_kubernetes_version(own, "1.34")
    inherited = cdk8s.Chart(app, "inherited")
    assert GpuClaimTemplate.mig(own, "a", gpu="A100_80GB", profile="3g.40gb").target.minor == 34
    assert GpuClaimTemplate.mig(inherited, "b", gpu="A100_80GB", profile="3g.40gb").target.minor == 33


def test_a_setter_drops_settings_read_before_it() -> None:
    app = cdk8s.App()
    with pytest.raises(DraConstructsError):  # the default target 1.32 has no DRA extended resources
        set_dra_extended_resources(app, {"nvidia.com/gpu": "gpu.nvidia.com"})
    set_kubernetes_version(app, "1.34")  # read as 1.32 above: must not stick
    assert set_dra_extended_resources(app, {"nvidia.com/gpu": "gpu.nvidia.com"}) == {
        "nvidia.com/gpu": "gpu.nvidia.com"}
