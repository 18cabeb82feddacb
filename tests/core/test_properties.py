"""Property: every input either synthesizes schema-valid YAML or raises DraConstructsError."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_constructs import Container, DraConstructsError, GpuClaimTemplate, GpuModel, GpuPod, GpuRequest, MigRequest

from .helpers import new_chart, synth, validate_schema

label_maps = st.dictionaries(st.sampled_from(["team", "example.com/tier", "bad key", ""]),
                             st.one_of(st.sampled_from(["a", "x" * 64, ""]), st.text(max_size=8)), max_size=2)
names = st.one_of(st.sampled_from(["gpu", "mig", "a", "trainer-1", "x" * 63]), st.text(max_size=70))
profiles = st.one_of(
    st.sampled_from([p.name for m in GpuModel for p in m.spec.mig_profiles]), st.text(max_size=12)
)
models = st.one_of(st.sampled_from([m.value for m in GpuModel]), st.text(max_size=12))
quantities = st.one_of(st.none(), st.sampled_from(["40Gi", "79Gi", "80Gi", "1e12", "500M", "0.5Ti"]),
                       st.text(max_size=8))
user_selectors = st.lists(
    st.sampled_from([
        "device.attributes['gpu.nvidia.com'].productName.lowerAscii().contains('nvidia')",
        "device.capacity['gpu.nvidia.com'].memory >= quantity('1Gi')",
        "device.attributes['gpu.nvidia.com'].cudaComputeCapability == '9.0.0'",
        "'uuid' in device.attributes['gpu.nvidia.com']",
        "device.attrs['x']",
        "1 + 1",
    ]),
    max_size=3,
)
counts = st.integers(min_value=-2, max_value=40)
requests = st.one_of(
    st.builds(lambda n, g, p, c, s: lambda: MigRequest(name=n, gpu=g, profile=p, count=c, selectors=tuple(s)),
              names, models, profiles, counts, user_selectors),
    st.builds(lambda n, ms, q, cc, c: lambda: GpuRequest(name=n, models=tuple(ms), min_memory=q,
                                                          min_compute_capability=cc, count=c),
              names, st.lists(models, max_size=2), quantities,
              st.one_of(st.none(), st.sampled_from(["8.0", "9.0", "10", "x"])), counts),
)


def build(version: str, request_thunk: Any, container_name: str, grace: int,
          labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
    chart = new_chart(version)
    request = request_thunk()
    template = GpuClaimTemplate(chart, "claim", requests=[request])
    GpuPod(chart, "pod", containers=[Container(name=container_name, image="img", claims=(template.use(),))],
           termination_grace_period_seconds=grace, labels=labels)
    return synth(chart)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    version=st.sampled_from(["1.32", "1.33", "1.34"]),
    request=requests | st.just(lambda: MigRequest(gpu="A30", profile="1g.6gb")),
    container_name=names,
    grace=st.integers(min_value=-1, max_value=600),
    labels=label_maps,
)
def test_inputs_synthesize_valid_yaml_or_raise_our_error(
    version: str, request: Any, container_name: str, grace: int, labels: dict[str, str]
) -> None:
    try:
        docs = build(version, request, container_name, grace, labels)
    except DraConstructsError as error:
        assert "Fix:" in str(error)
        return
    for doc in docs:
        validate_schema(doc, version)


@settings(max_examples=40, deadline=None)
@given(st.builds(lambda **kw: kw, name=names, gpu=models, profile=profiles, count=counts))
def test_request_models_raise_only_our_error(kwargs: dict[str, Any]) -> None:
    try:
        request = MigRequest(**kwargs)
    except DraConstructsError as error:
        assert error.field and "Fix:" in str(error)
        return
    assert (request.name, request.count) == (kwargs["name"], kwargs["count"])
