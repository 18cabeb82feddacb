"""cdk8s-plus-28 next to dra-constructs: what it cannot carry, and the way that works."""

from __future__ import annotations

import cdk8s
import cdk8s_plus_28 as kplus

from dra_constructs import Container, GpuClaimTemplate, GpuPod

from .helpers import by_kind, new_chart, synth, validate_schema


def test_cdk8s_plus_28_drops_dra_fields_even_from_json_patches() -> None:
    # Why the library builds its own Pods: kplus's 1.28 L1 schema filters 1.31+ claim fields.
    chart = new_chart()
    pod = kplus.Pod(chart, "plus", containers=[kplus.ContainerProps(image="img", name="c")])
    cdk8s.ApiObject.of(pod).add_json_patch(cdk8s.JsonPatch.add(
        "/spec/resourceClaims", [{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]))
    (doc,) = synth(chart)
    assert doc["spec"]["resourceClaims"] == [{"name": "gpu"}]  # template name silently dropped


def test_cdk8s_plus_service_account_with_a_gpu_pod() -> None:
    chart = new_chart()
    account = kplus.ServiceAccount(chart, "runner")
    gpu = GpuClaimTemplate.mig(chart, "slice", gpu="A100_40GB", profile="1g.5gb")
    GpuPod(chart, "pod", service_account_name=account.name,
           containers=[Container(name="c", image="img", claims=(gpu.use(),))])
    docs = synth(chart)
    pod = by_kind(docs, "Pod")[0]
    assert pod["spec"]["serviceAccountName"] == by_kind(docs, "ServiceAccount")[0]["metadata"]["name"]
    assert pod["spec"]["resourceClaims"] == [{"name": "slice", "resourceClaimTemplateName": gpu.template_name}]
    for doc in docs:
        validate_schema(doc, "1.32")
