"""Consumable capacity rounded by ``requestPolicy`` as the scheduler's ``consumable_capacity.go`` does."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from dra_constructs.cli import main
from dra_constructs.errors import DraConstructsError
from dra_constructs.fit import Claim, Inventory, default_device_classes, validate_allocation
from dra_constructs.fit.allocator import DeviceResult
from dra_constructs.fit.capacity import RequestPolicy, consumed_amount, format_quantity
from dra_constructs.target import Target

from .helpers import checked_fit, claim, only, request

GI = 2**30


def shared_slices(policy: dict[str, Any] | None, value: str = "80Gi", **capacity: Any) -> list[dict[str, Any]]:
    """One node with one shared GPU whose ``memory`` capacity has ``policy``."""
    memory: dict[str, Any] = {"value": value}
    if policy is not None:
        memory["requestPolicy"] = policy
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": {
        "driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0", "allowMultipleAllocations": True, "attributes": {"type": {"string": "gpu"}},
                     "capacity": {"memory": memory, **capacity}}]}}]


def share(name: str, memory: str | None) -> Claim:
    extra: dict[str, Any] = {"capacity": {"requests": {"memory": memory}}} if memory is not None else {}
    return claim(name, request("gpu", device_class="gpu.nvidia.com", **extra))


def consumed(policy: dict[str, Any] | None, *memories: str | None, value: str = "80Gi") -> list[dict[str, str]] | None:
    """Each claim's ``consumedCapacity`` of the shared GPU, ``None`` if the claims do not fit."""
    result = only(checked_fit([share(f"c{i}", m) for i, m in enumerate(memories)],
                              Inventory.from_slices(shared_slices(policy, value))))
    return [{n: format_quantity(a) for n, a in d.consumed} for d in result.devices] if result.allocatable else None


def misrecorded(policy: dict[str, Any] | None, memory: str | None, recorded: int) -> list[str]:
    """The validator's problems with one claim recorded as consuming ``recorded`` bytes."""
    inventory = Inventory.from_slices(shared_slices(policy))
    result = DeviceResult("c", "gpu", "gpu.nvidia.com", "n", "gpu-0", consumed=(("memory", Fraction(recorded)),))
    return validate_allocation([share("c", memory)], inventory, inventory.nodes[0], [result],
                               classes=default_device_classes(), target=Target.parse("1.36"))


VALUES = {"default": "10Gi", "validValues": ["10Gi", "20Gi", "40Gi"]}
RANGE = {"default": "10Gi", "validRange": {"min": "10Gi", "max": "40Gi", "step": "5Gi"}}


def test_valid_values_round_up_to_the_smallest_valid_value() -> None:
    assert consumed(VALUES, "15Gi") == [{"memory": "20Gi"}]
    assert consumed(VALUES, "20Gi") == [{"memory": "20Gi"}]
    assert consumed(VALUES, "1Gi") == [{"memory": "10Gi"}]


def test_valid_values_above_the_largest_refuse_the_device() -> None:
    assert consumed(VALUES, "41Gi") is None  # 41Gi of 80Gi would fit unrounded
    assert "capacity" in only(checked_fit([share("c", "41Gi")], Inventory.from_slices(shared_slices(VALUES)))).reason


def test_range_below_min_consumes_min() -> None:
    assert consumed(RANGE, "1") == [{"memory": "10Gi"}]
    assert consumed({"default": "10Gi", "validRange": {"min": "10Gi"}}, "3Gi") == [{"memory": "10Gi"}]


def test_range_rounds_up_to_min_plus_a_multiple_of_step() -> None:
    assert consumed(RANGE, "12Gi") == [{"memory": "15Gi"}]
    assert consumed(RANGE, "15Gi") == [{"memory": "15Gi"}]
    assert consumed(RANGE, "15Gi", "1") == [{"memory": "15Gi"}, {"memory": "10Gi"}]
    # without step, a request at or above min is taken as asked
    assert consumed({"default": "10Gi", "validRange": {"min": "10Gi"}}, "12345Mi") == [{"memory": "12345Mi"}]


def test_range_above_max_refuses_the_device() -> None:
    assert consumed(RANGE, "40Gi") == [{"memory": "40Gi"}]
    assert consumed(RANGE, "41Gi") is None  # rounds to 45Gi > max 40Gi; 45Gi of 80Gi would fit
    assert consumed({"default": "10Gi", "validRange": {"min": "10Gi", "max": "30Gi"}}, "31Gi") is None


def test_no_request_consumes_the_default_else_the_whole_capacity() -> None:
    assert consumed(RANGE, None, None) == [{"memory": "10Gi"}, {"memory": "10Gi"}]
    assert consumed(None, None) == [{"memory": "80Gi"}]  # no policy: the whole device
    assert consumed(None, None, "1") is None
    assert consumed({"validValues": ["8Gi"], "default": "8Gi"}, None) == [{"memory": "8Gi"}]
    assert misrecorded(RANGE, None, 10 * GI) == []
    assert misrecorded(RANGE, None, 1) != []  # the validator knows the default
    assert misrecorded(None, None, 80 * GI) == []
    assert misrecorded(None, None, 10 * GI) != []  # ... and the whole capacity


def test_no_policy_consumes_what_is_asked() -> None:
    assert consumed(None, "12345Mi", "1") == [{"memory": "12345Mi"}, {"memory": "1"}]
    assert consumed(None, "40Gi", "40Gi") == [{"memory": "40Gi"}, {"memory": "40Gi"}]
    assert consumed(None, "40Gi", "40Gi", "1") is None
    assert misrecorded(None, "12345Mi", 12345 * 2**20) == []
    assert misrecorded(None, "12345Mi", 80 * GI) != []


def test_rounding_decides_whether_a_second_claim_fits() -> None:
    policy = {"default": "10Gi", "validRange": {"min": "10Gi", "step": "10Gi"}}
    assert consumed(policy, "35Gi", "35Gi") == [{"memory": "40Gi"}, {"memory": "40Gi"}]
    # 45Gi + 35Gi asks for exactly 80Gi, but rounds to 50Gi + 40Gi
    assert consumed(policy, "45Gi", "35Gi") is None
    assert consumed(None, "45Gi", "35Gi") == [{"memory": "45Gi"}, {"memory": "35Gi"}]
    values = {"default": "16Gi", "validValues": ["16Gi", "32Gi", "64Gi"]}
    assert consumed(values, "33Gi", "16Gi") == [{"memory": "64Gi"}, {"memory": "16Gi"}]
    assert consumed(values, "33Gi", "17Gi") is None  # 64Gi + 32Gi > 80Gi


def test_every_capacity_of_the_device_is_consumed() -> None:
    slices = shared_slices(RANGE, cores={"value": "8", "requestPolicy": {
        "default": "1", "validValues": ["1", "2", "4"]}})
    result = only(checked_fit([claim("c", request("gpu", device_class="gpu.nvidia.com", capacity={
        "requests": {"memory": "11Gi", "cores": "3"}}))], Inventory.from_slices(slices)))
    assert result.devices[0].as_json()["consumedCapacity"] == {"memory": "15Gi", "cores": "4"}
    lacks = claim("c", request("gpu", device_class="gpu.nvidia.com", capacity={"requests": {"disk": "1"}}))
    assert not only(checked_fit([lacks], Inventory.from_slices(slices))).allocatable


def test_step_uses_the_integer_path_without_fractional_ranges() -> None:
    # Quantity.Value() rounds 0.6, min 0.5 and step 0.25 up to 1, 1, 1: the request consumes 1
    policy = {"default": "500m", "validRange": {"min": "500m", "step": "250m"}}
    assert consumed(policy, "600m", value="4") == [{"memory": "1"}]
    assert consumed(policy, "100m", value="4") == [{"memory": "500m"}]


def test_an_unrepresentable_request_fails_the_node() -> None:
    inventory = Inventory.from_slices(shared_slices(RANGE, "16Ei"))
    result = only(checked_fit([share("c", "10E")], inventory))  # 10^19: an inf.Dec quantity
    assert not result.allocatable and "request 10000000000000000000 exceeds MaxInt64" in result.reason
    result = only(checked_fit([share("c", "10Ei")], inventory))  # BinarySI: capped at MaxInt64 when parsed
    assert not result.allocatable and "up to the next step passes MaxInt64" in result.reason


@pytest.mark.parametrize(("requested", "policy", "want"), [
    (None, None, 80), (None, RequestPolicy(default=Fraction(8)), 8), (Fraction(7), None, 7),
    (Fraction(7), RequestPolicy(valid_values=(Fraction(4), Fraction(8))), 8),
    (Fraction(9), RequestPolicy(valid_values=(Fraction(4), Fraction(8))), 9),  # refused by violates_policy
    (Fraction(1), RequestPolicy(has_range=True, min=Fraction(4), step=Fraction(3)), 4),
    (Fraction(8), RequestPolicy(has_range=True, min=Fraction(4), step=Fraction(3)), 10),
    (Fraction(11, 2), RequestPolicy(has_range=True, min=Fraction(4)), Fraction(11, 2)),
])
def test_consumed_amount(requested: Fraction | None, policy: RequestPolicy | None, want: Fraction) -> None:
    assert consumed_amount(requested, Fraction(80), policy) == want


def test_malformed_policies_are_input_errors() -> None:
    for policy, field_name in (({"default": "1", "validRange": {"max": "4"}}, "validRange.min"),
                               ({"default": "1", "validRange": {"min": "1", "step": "0"}}, "validRange.step"),
                               ({"default": "lots"}, "default")):
        with pytest.raises(DraConstructsError, match=field_name):
            Inventory.from_slices(shared_slices(policy))


def test_validation_checks_the_rounded_amount_and_the_totals() -> None:
    inventory = Inventory.from_slices(shared_slices(RANGE))
    target = Target.parse("1.36")
    claims = [share("a", "12Gi"), share("b", "40Gi"), share("c", "40Gi")]

    def problems(*amounts: int) -> list[str]:
        results = [DeviceResult(c.name, "gpu", "gpu.nvidia.com", "n", "gpu-0", consumed=(("memory", Fraction(a)),))
                   for c, a in zip(claims, amounts, strict=False)]
        return validate_allocation(claims[:len(amounts)], inventory, inventory.nodes[0], results,
                                   classes=default_device_classes(), target=target)

    assert problems(15 * GI) == []
    assert any("the rule gives 16106127360" in p for p in problems(12 * GI))  # not rounded
    assert any("overdrawn" in p for p in problems(15 * GI, 40 * GI, 40 * GI))
    big = [share("a", "41Gi")]
    result = DeviceResult("a", "gpu", "gpu.nvidia.com", "n", "gpu-0", consumed=(("memory", Fraction(45 * GI)),))
    assert any("no amount" in p for p in validate_allocation(big, inventory, inventory.nodes[0], [result],
                                                            classes=default_device_classes(), target=target))


def test_format_quantity() -> None:
    assert [format_quantity(Fraction(v)) for v in (0, 3, 1024, 15 * GI, Fraction(3, 2))] == [
        "0", "3", "1Ki", "15Gi", "1500m"]


def test_cli_prints_the_rounded_consumption(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    slices = tmp_path / "slices.yaml"
    slices.write_text(yaml.safe_dump_all(shared_slices(RANGE)))
    manifests = tmp_path / "claims.yaml"
    manifests.write_text(yaml.safe_dump_all([{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com", "capacity": {"requests": {"memory": memory}}}}]}}}
        for name, memory in (("a", "12Gi"), ("b", "36Gi"))]))
    argv = ["fit", "--slices", str(slices), "--kubernetes-version", "1.36", str(manifests)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "a/gpu: gpu.nvidia.com/n/gpu-0 (consumes memory=15Gi)" in out
    assert "b/gpu: gpu.nvidia.com/n/gpu-0 (consumes memory=40Gi)" in out
    assert main([*argv, "--format", "json"]) == 0
    devices = json.loads(capsys.readouterr().out)["nodes"]["n"]["devices"]
    assert [d["consumedCapacity"] for d in devices] == [{"memory": "15Gi"}, {"memory": "40Gi"}]


def names(capacity: dict[str, Any], requests: dict[str, str]) -> Any:
    slices = shared_slices(None)
    slices[0]["spec"]["devices"][0]["capacity"] = capacity
    gpu = claim("c", request("gpu", device_class="gpu.nvidia.com", capacity={"requests": requests}))
    result = only(checked_fit([gpu], Inventory.from_slices(slices)))
    return [{n: format_quantity(a) for n, a in d.consumed} for d in result.devices] or result.reason


def test_capacity_names_resolve_with_and_without_the_driver_domain() -> None:
    memory = {"value": "80Gi", "requestPolicy": RANGE}
    assert names({"memory": memory}, {"gpu.nvidia.com/memory": "12Gi"}) == [{"memory": "15Gi"}]
    assert names({"gpu.nvidia.com/memory": memory}, {"memory": "12Gi"}) == [{"gpu.nvidia.com/memory": "15Gi"}]
    assert "capacity" in names({"memory": memory}, {"example.com/memory": "12Gi"})  # another domain: no match
    # published twice: the qualified entry is the capacity, counted once
    both = {"memory": {"value": "1"}, "gpu.nvidia.com/memory": memory}
    assert names(both, {"memory": "12Gi"}) == [{"gpu.nvidia.com/memory": "15Gi"}]
    assert "requested both as 'memory' and as 'gpu.nvidia.com/memory'" in names(
        {"memory": memory}, {"memory": "12Gi", "gpu.nvidia.com/memory": "12Gi"})
