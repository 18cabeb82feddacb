from __future__ import annotations

from typing import Any

import pytest

from dra_constructs import ClaimUse, Container, DraConstructsError, PodClaim, PreStop, render_pod_spec


def use(claim: str = "gpu", request: str | None = None) -> ClaimUse:
    return ClaimUse(claim=claim, request=request, template_name=f"{claim}-template")


def test_claims_come_from_container_uses() -> None:
    spec = render_pod_spec([Container(name="a", image="img", claims=(use(request="mig"),))])
    assert spec["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]
    assert spec["containers"][0]["resources"]["claims"] == [{"name": "gpu", "request": "mig"}]
    assert spec["terminationGracePeriodSeconds"] == 60
    assert spec["containers"][0]["lifecycle"] == {"preStop": {"sleep": {"seconds": 5}}}


def test_existing_claim_by_name_and_exec_pre_stop() -> None:
    spec = render_pod_spec(
        [Container(name="a", image="img", claims=(ClaimUse(claim="shared"),))],
        claims=[PodClaim(name="shared", resource_claim_name="team-claim")],
        pre_stop=PreStop(command=("/bin/sh", "-c", "kill -TERM 1")),
        termination_grace_period_seconds=30,
    )
    assert spec["resourceClaims"] == [{"name": "shared", "resourceClaimName": "team-claim"}]
    assert spec["containers"][0]["lifecycle"]["preStop"] == {"exec": {"command": ["/bin/sh", "-c", "kill -TERM 1"]}}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"containers": []}, "containers"),
        ({"containers": [Container(name="a", image="i", claims=(ClaimUse(claim="nope"),))]}, "claims"),
        ({"containers": [Container(name="a", image="i")], "claims": [PodClaim(name="x", resource_claim_name="c")]},
         "claims"),
        ({"containers": [Container(name="a", image="i"), Container(name="a", image="j")]}, "containers[].name"),
        ({"containers": [Container(name="A", image="i")]}, "name"),
        ({"containers": [Container(name="a", image=" ")]}, "image"),
        ({"containers": [Container(name="a", image="i", claims=(use(),))], "termination_grace_period_seconds": 0},
         "termination_grace_period_seconds"),
        ({"containers": [Container(name="a", image="i", claims=(use(),))], "termination_grace_period_seconds": 5},
         "pre_stop"),
        ({"containers": [Container(name="a", image="i", requests={"cpu": "lots"})]}, "requests"),
        ({"containers": [Container(name="a", image="i", claims=(ClaimUse(claim="x"),))],
          "claims": [PodClaim(name="x")]}, "claims"),
        ({"containers": [Container(name="a", image="i", extra={"image": "other"})]}, "extra"),
    ],
)
def test_bad_pods_name_field_and_fix(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(DraConstructsError) as info:
        render_pod_spec(**kwargs)
    assert field in info.value.field
    assert "Fix:" in str(info.value)


@pytest.mark.parametrize(
    ("container", "field"),
    [
        (Container(name="a", image="i", ports=(0,)), "ports"),
        (Container(name="a", image="i", image_pull_policy="Sometimes"), "image_pull_policy"),
    ],
)
def test_container_fields_the_api_would_reject(container: Container, field: str) -> None:
    with pytest.raises(DraConstructsError) as info:
        render_pod_spec([container])
    assert field in info.value.field


@pytest.mark.parametrize(
    ("labels", "ok"),
    [({"team": "a"}, True), ({"example.com/team": "a-b_c.d"}, True), ({"team": ""}, True),
     ({"team": "has space"}, False), ({"": "x"}, False), ({"a/b/c": "x"}, False), ({"team": "x" * 64}, False),
     ({"UPPER.example.com/x": "y"}, False)],
)
def test_node_selector_labels_are_checked(labels: dict[str, str], ok: bool) -> None:
    containers = [Container(name="a", image="i")]
    if ok:
        assert render_pod_spec(containers, node_selector=labels)["nodeSelector"] == labels
    else:
        with pytest.raises(DraConstructsError, match="node_selector"):
            render_pod_spec(containers, node_selector=labels)


def test_restart_policy_is_checked() -> None:
    with pytest.raises(DraConstructsError, match="restart policy"):
        render_pod_spec([Container(name="a", image="i")], restart_policy="Sometimes")
