"""The precomputed catalog answers (issue 14): equal to the live check, used only where they vouch.

``GpuClaimTemplate`` against the default inventory (``CATALOG``) passes a ``LazyCatalog``; a claim
made only of generated request shapes within the table's counts passes without building the
catalog inventory or evaluating CEL on its devices. Everything else builds it and takes the
live path, whose errors stay word for word what they were.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from dra_constructs import (
    Alignment,
    DraConstructsError,
    FirstAvailable,
    GpuClaimTemplate,
    GpuRequest,
    MatchAttribute,
    MigRequest,
    set_inventory,
)
from dra_constructs import selector_checks as sc
from dra_constructs.catalog import catalog_resource_slices
from dra_constructs.requests import DeviceToleration, render_claim_spec
from dra_constructs.target import Target

from .helpers import new_chart

MODES = sc.catalog_modes()
#: The modes/targets whose every entry is recomputed (the default MIG shape before and from 1.36);
#: the others recompute a deterministic sample (all of them: ~17 s of CPU, over the suite's budget).
FULL = {("static", 32), ("dynamic", 36)}
SAMPLE_EVERY = 9


def test_table_covers_exactly_the_generated_shapes() -> None:
    table = sc.catalog_table()
    assert set(table) == set(MODES)
    for answers in table.values():
        assert list(answers) == list(sc.generated_catalog_shapes())


@pytest.mark.parametrize(("mode", "minor"), MODES)
def test_entries_equal_the_live_check(mode: str, minor: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for cache in ("_PASSED", "_FIT_CACHE", "_ERROR_CACHE"):  # nothing answered from an earlier check
        monkeypatch.setattr(sc, cache, {})
    target = Target(minor=minor)
    checked = 0
    for index, (shape, expected) in enumerate(sc.catalog_table()[mode, minor].items()):
        if (mode, minor) not in FULL and (index + minor) % SAMPLE_EVERY:
            continue
        error = sc._runtime_error(*shape, target, sc.catalog_inventory(mode, target.counter_sets_in_own_slice))
        if expected is None:
            assert error is not None, shape
            continue
        assert error is None, shape
        assert expected == 0 or sc.live_catalog_check(mode, minor, shape, expected), (shape, expected)
        assert not sc.live_catalog_check(mode, minor, shape, expected + 1), (shape, expected)
        checked += 1
    assert checked >= (len(list(sc.generated_catalog_shapes())) if (mode, minor) in FULL else 5)


@dataclass
class Spy:
    """Catalog builds and live CEL run-time checks made while the test runs."""

    builds: list[str] = field(default_factory=list)
    runtime_checks: int = 0


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Spy]:
    seen = Spy()
    build, runtime_error = sc.LazyCatalog.build, sc._runtime_error

    def counting_build(self: sc.LazyCatalog) -> Any:
        seen.builds.append(self.mig_mode)
        return build(self)

    def counting_runtime_error(*args: Any) -> str | None:
        seen.runtime_checks += 1
        return runtime_error(*args)

    monkeypatch.setattr(sc.LazyCatalog, "build", counting_build)
    monkeypatch.setattr(sc, "_runtime_error", counting_runtime_error)
    monkeypatch.setattr(sc, "_PASSED", {})  # not answered by an earlier test's identical claim
    yield seen


def _limit(mode: str, minor: int, request: MigRequest | GpuRequest) -> int:
    limit = sc.catalog_table()[mode, minor][request.device_class(), tuple(request.generated_selectors("t"))]
    assert limit is not None
    return limit


@pytest.mark.parametrize(("version", "mig_mode", "mode"), [
    ("1.32", None, "static"), ("1.34", None, "static"), ("1.34", "dynamic", "dynamic"), ("1.36", None, "dynamic"),
])
def test_generated_shapes_pass_from_the_table(version: str, mig_mode: str | None, mode: str, spy: Spy) -> None:
    chart = new_chart(version)
    minor = Target.parse(version).minor
    kwargs: dict[str, Any] = {"mig_mode": mig_mode} if mig_mode else {}
    mig = MigRequest(name="slices", gpu="A100_80GB", profile="3g.40gb")
    mig = mig.model_copy(update={"count": _limit(mode, minor, mig)})
    GpuClaimTemplate(chart, "mig", requests=[mig], **kwargs)
    GpuClaimTemplate.whole_gpus(chart, "h100", models=["H100_80GB"], count=8, **kwargs)
    GpuClaimTemplate.mig(chart, "one", gpu="H200_141GB", profile="1g.18gb", **kwargs)
    two = [MigRequest(name="a", gpu="A100_80GB", profile="1g.10gb", count=3),
           MigRequest(name="b", gpu="H100_80GB", profile="7g.80gb", count=2)]
    GpuClaimTemplate(chart, "two", requests=two, **kwargs)  # each request alone, as the live check does
    assert spy.builds == [] and spy.runtime_checks == 0


def test_a_fresh_process_never_builds_the_catalog() -> None:
    code = (
        "import sys, cdk8s\n"
        "from dra_constructs import GpuClaimTemplate\n"
        "from dra_constructs import selector_checks as sc\n"
        "chart = cdk8s.Chart(cdk8s.App(), 'c')\n"
        "GpuClaimTemplate.mig(chart, 's', gpu='A100_80GB', profile='3g.40gb')\n"
        "GpuClaimTemplate.whole_gpus(chart, 'g', models=['H100_80GB'], count=8)\n"
        "assert sc.catalog_inventory.cache_info().currsize == 0, sc.catalog_inventory.cache_info()\n"
        "assert 'dra_constructs.fit' not in sys.modules  # nor the allocator imported\n"
        "GpuClaimTemplate.whole_gpus(chart, 'too-many', models=['H100_80GB'], count=2, selectors=['true'])\n"
        "assert sc.catalog_inventory.cache_info().currsize == 1\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def _live_error(version: str, mode: str, where: str, requests: list[Any]) -> DraConstructsError:
    """Today's live check: ``check_requests`` with the built catalog inventory, as claims.py called it."""
    target = Target.parse(version)
    spec, resolved = render_claim_spec(requests, [], target, where)
    with pytest.raises(DraConstructsError) as info:
        sc.check_requests(resolved, target, where, sc.catalog_inventory(mode, target.counter_sets_in_own_slice), spec,
                          catalog=True)
    return info.value


@pytest.mark.parametrize(("version", "mode"), [("1.34", "static"), ("1.36", "dynamic")])
@pytest.mark.parametrize("request_", [
    MigRequest(name="mig", gpu="A100_80GB", profile="3g.40gb"),
    MigRequest(name="mig", gpu="A30", profile="1g.6gb"),
    GpuRequest(name="gpu", models=("H100_80GB",)),
], ids=["3g.40gb", "a30-1g.6gb", "h100"])
def test_a_count_above_the_table_fails_as_today(version: str, mode: str, request_: MigRequest | GpuRequest,
                                               spy: Spy) -> None:
    too_many = request_.model_copy(update={"count": _limit(mode, Target.parse(version).minor, request_) + 1})
    chart = new_chart(version)
    with pytest.raises(DraConstructsError) as info:
        GpuClaimTemplate(chart, "too-many", requests=[too_many])
    assert spy.builds == [mode]
    assert str(info.value) == str(_live_error(version, mode, "test/too-many", [too_many]))


def test_a_lower_table_entry_sends_the_claim_live(spy: Spy, monkeypatch: pytest.MonkeyPatch) -> None:
    request = MigRequest(name="mig", gpu="A100_80GB", profile="3g.40gb", count=2)
    shape = (request.device_class(), tuple(request.generated_selectors("t")))
    table = {key: dict(answers) for key, answers in sc.catalog_table().items()}
    table["static", 34][shape] = 1  # the table, not "a generated shape", decides
    monkeypatch.setattr(sc, "catalog_table", lambda: table)
    GpuClaimTemplate(new_chart("1.34"), "two", requests=[request])
    assert spy.builds == ["static"] and spy.runtime_checks == 1


LIVE_CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "user selector": ("1.34", {"requests": [MigRequest(gpu="A100_80GB", profile="3g.40gb", selectors=(
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('1Gi')) >= 0",))]}),
    "constraint": ("1.34", {"requests": [MigRequest(gpu="A100_80GB", profile="3g.40gb", count=2)],
                            "constraints": [MatchAttribute(attribute="gpu.nvidia.com/parentUUID")]}),
    "alignment": ("1.34", {"requests": [GpuRequest(models=("H100_80GB",), count=2)],
                           "align": [Alignment(on="pcieRoot")]}),
    "firstAvailable": ("1.34", {"requests": [FirstAvailable(name="any", alternatives=[
        MigRequest(name="small", gpu="A100_80GB", profile="3g.40gb")])]}),
    "tolerations": ("1.34", {"requests": [GpuRequest(models=("H100_80GB",), tolerations=(
        DeviceToleration(key="example.com/maintenance", operator="Exists"),))]}),
    "tenant class": ("1.34", {"requests": [MigRequest(gpu="A100_80GB", profile="3g.40gb",
                                                      device_class_name="tenant-a-mig")]}),
    "models subset": ("1.34", {"requests": [GpuRequest(models=("H100_80GB", "H200_141GB"))]}),
    "patch release": ("1.34.2", {"requests": [MigRequest(gpu="A100_80GB", profile="3g.40gb")]}),
}


@pytest.mark.parametrize("case", list(LIVE_CASES))
def test_other_catalog_claims_take_the_live_path(case: str, spy: Spy) -> None:
    version, kwargs = LIVE_CASES[case]
    GpuClaimTemplate(new_chart(version), "claim", **kwargs)
    assert spy.builds == ["static"] and spy.runtime_checks >= 1


def test_other_inventories_take_the_live_path(spy: Spy, tmp_path: Path) -> None:
    slices = tmp_path / "slices.yaml"
    slices.write_text(yaml.safe_dump_all(catalog_resource_slices(["A100_80GB"], gpus_per_node=1)))
    request = MigRequest(gpu="A100_80GB", profile="3g.40gb")
    GpuClaimTemplate(new_chart("1.34"), "explicit", requests=[request], inventory=sc.catalog_inventory("static"))
    GpuClaimTemplate(new_chart("1.34"), "files", requests=[request], inventory=slices)
    chart = new_chart("1.34")
    set_inventory(chart.node.root, slices)  # type: ignore[arg-type]
    GpuClaimTemplate(chart, "app-wide", requests=[request])
    with pytest.raises(DraConstructsError, match="count=3"):  # one A100: 2 slices of 3g.40gb, the table says 16
        GpuClaimTemplate(chart, "three", requests=[request.model_copy(update={"count": 3})])
    assert spy.builds == [] and spy.runtime_checks == 4
