"""List-valued fields take the lists users write, store tuples, and refuse a bare string."""

from __future__ import annotations

import pytest

from dra_constructs import Alignment, ContextsRemaining, GpuModel, GpuRequest, PreemptionPolicy
from dra_constructs.errors import DraConstructsError


def test_sequence_fields_store_tuples() -> None:
    request = GpuRequest(name="gpu", models=[GpuModel.H100_80GB], selectors=["device.driver == 'gpu.nvidia.com'"])
    assert request.models == (GpuModel.H100_80GB,) and isinstance(request.selectors, tuple)
    assert hash(request) == hash(GpuRequest(name="gpu", models=(GpuModel.H100_80GB,),
                                            selectors=("device.driver == 'gpu.nvidia.com'",)))
    assert Alignment(on="numaNode", requests=["a", "b"]).requests == ("a", "b")


def test_a_string_is_not_a_list_of_selectors() -> None:
    with pytest.raises(DraConstructsError, match="selectors"):
        GpuRequest(name="gpu", models=[GpuModel.H100_80GB], selectors="device.driver == 'gpu.nvidia.com'")  # type: ignore[arg-type]


def test_preemption_policy_takes_python_names_and_renders_camel_case() -> None:
    policy = PreemptionPolicy(grace_period_seconds=10, on_contexts_remaining=ContextsRemaining.QUARANTINE)
    assert policy.parameters()["gracePeriodSeconds"] == 10
    assert policy.parameters()["onContextsRemaining"] == "Quarantine"
    assert PreemptionPolicy.model_validate({"gracePeriodSeconds": 10, "onContextsRemaining": "Quarantine"}) == policy
