"""The packing cost of exclusive-gpu MIG isolation, placed by fit's allocator with the agent's isolation taints."""

from __future__ import annotations

from collections import defaultdict
from functools import cache
from typing import Any

import pytest

from dra_constructs.catalog import catalog_resource_slices
from dra_constructs.fit.isolation import PackingResult, gpu_of, pack
from dra_constructs.target import Target

TARGET = Target.parse("1.37")


@cache
def _static() -> list[dict[str, Any]]:
    return catalog_resource_slices(["H100_80GB"], gpus_per_node=8)


def _tenants_per_gpu(result: PackingResult) -> dict[str, set[str]]:
    by_gpu: dict[str, set[str]] = defaultdict(set)
    for tenant, device in result.placements:
        by_gpu[gpu_of(device)].add(tenant)
    return by_gpu


def test_exclusive_tenants_never_share_a_gpu_and_pay_in_gpus() -> None:
    node = "catalog-h100-80gb-1g10gb"
    shared = pack(_static(), node, "1g.10gb", 4, 3, "shared-gpu", TARGET, taints=False)
    exclusive = pack(_static(), node, "1g.10gb", 4, 3, "exclusive-gpu", TARGET)
    assert shared.placed == exclusive.placed == 12
    assert max(len(t) for t in _tenants_per_gpu(shared).values()) > 1  # today: tenants share GPUs
    assert all(len(t) == 1 for t in _tenants_per_gpu(exclusive).values())
    assert (shared.gpus_used, exclusive.gpus_used) == (2, 4)  # 12 slices: 2 GPUs packed, one GPU per tenant


def test_more_exclusive_tenants_than_gpus_are_not_all_served() -> None:
    node = "catalog-h100-80gb-1g10gb"
    shared = pack(_static(), node, "1g.10gb", 16, 1, "shared-gpu", TARGET, taints=False)
    exclusive = pack(_static(), node, "1g.10gb", 16, 1, "exclusive-gpu", TARGET)
    assert (shared.placed, shared.tenants_served) == (16, 16)
    assert (exclusive.placed, exclusive.tenants_served, exclusive.gpus_used) == (8, 8, 8)


def test_shared_taints_change_nothing_among_shared_tenants() -> None:
    node = "catalog-h100-80gb-2g20gb"
    untainted = pack(_static(), node, "2g.20gb", 6, 3, "shared-gpu", TARGET, taints=False)
    tainted = pack(_static(), node, "2g.20gb", 6, 3, "shared-gpu", TARGET)
    assert untainted == tainted


@pytest.mark.parametrize("profile", ["1g.10gb", "3g.40gb"])
def test_dynamic_mig_exclusive_tenants_keep_to_their_gpus(profile: str) -> None:
    slices = catalog_resource_slices(["H100_80GB"], gpus_per_node=8, mig_mode="dynamic", split_counter_sets=True)
    result = pack(slices, "catalog-h100-80gb", profile, 3, 2, "exclusive-gpu", TARGET)
    assert result.placed == 6 and all(len(t) == 1 for t in _tenants_per_gpu(result).values())
