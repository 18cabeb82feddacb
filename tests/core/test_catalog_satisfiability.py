"""The precomputed satisfiability of the catalog's generated selectors equals the CEL evaluation (issue 14)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dra_constructs import GpuClaimTemplate, GpuModel
from dra_constructs import selector_checks as sc
from dra_constructs.target import SUPPORTED_MINORS, Target

from .helpers import new_chart


def test_table_covers_exactly_the_generated_shapes() -> None:
    assert set(sc.catalog_table()) == set(sc.generated_catalog_requests())


@pytest.mark.parametrize("minor", list(SUPPORTED_MINORS))
def test_every_entry_equals_the_live_evaluation(minor: int) -> None:
    devices = sc.CatalogDevices()  # a separate instance: never answered from the table
    target = Target.parse(f"1.{minor}")
    for (device_class, selectors), expected in sc.catalog_table().items():
        assert sc.compute_best_pool(device_class, selectors, target, devices) == expected, selectors


def test_generated_claims_share_one_catalog_inventory() -> None:
    # Issue 10: the construct-time check runs the allocator on the catalog inventory, built once
    # per MIG shape (the table above still answers scripts/catalog_satisfiability.py).
    code = (
        "import cdk8s\n"
        "from dra_constructs import GpuClaimTemplate\n"
        "from dra_constructs import selector_checks as sc\n"
        "chart = cdk8s.Chart(cdk8s.App(), 'c')\n"
        "GpuClaimTemplate.mig(chart, 's', gpu='A100_80GB', profile='3g.40gb')\n"
        "GpuClaimTemplate.whole_gpus(chart, 'g', models=['H100_80GB'], count=8)\n"
        "assert sc.catalog_inventory.cache_info().currsize == 1\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_an_unsatisfiable_count_is_still_refused_from_the_table() -> None:
    with pytest.raises(sc.DraConstructsError, match="no node of the inventory can allocate the claim"):
        GpuClaimTemplate.whole_gpus(new_chart(), "g", models=[GpuModel.H100_80GB], count=9)
