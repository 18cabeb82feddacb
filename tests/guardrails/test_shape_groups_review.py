"""Review of "set rules judge each shape once": pods alike but for what else a rule may read - a suppression
annotation, the Kueue queue label, a tenant label - or for identity only (ownerReferences, hash labels, node)
get the findings and suppressions they get when every object is judged on its own."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest

from dra_constructs.guardrails.suppressions import SUPPRESSIONS_ANNOTATION

from .test_shape_groups import _each_alone, _streamed

_SET: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "capped"},
     "spec": {"hard": {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "1"}}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "queued"},
     "spec": {"clusterQueue": "x"}},
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "owner",
                                                         "labels": {"dra-constructs.io/tenant": "o"}}},
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "borrower",
                                                         "labels": {"dra-constructs.io/tenant": "b"}}},
    {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "shared", "namespace": "owner"},
     "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}},
    *({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t", "namespace": ns},
       "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}}}}
      for ns, cls in (("a", "gpu.nvidia.com"), ("capped", "gpu.nvidia.com"), ("queued", "gpu.amd.com"))),
]
_RULES = ("DRA006", "DRA009", "DRA013", "DRA014", "DRA008")


def _pod(r: random.Random, i: int) -> dict[str, Any]:
    labels: dict[str, Any] = {"app": "x"}
    if r.random() < .4:
        labels["tenant"] = r.choice(["blue", "green"])
    if r.random() < .3:
        labels["kueue.x-k8s.io/queue-name"] = r.choice(["lq", ""])
    if r.random() < .3:
        labels["pod-template-hash"] = str(r.randrange(3))  # identity: left out of the key
    metadata: dict[str, Any] = {"name": f"p{i}", "namespace": r.choice(["a", "capped", "queued", "borrower"]),
                                "uid": f"u{i}", "labels": labels}
    if r.random() < .3:
        metadata["annotations"] = {SUPPRESSIONS_ANNOTATION: json.dumps(
            [{"rule": r.choice(_RULES), "reason": "reviewed: a test of suppressions by shape"}])}
    if r.random() < .3:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": f"o{i}"}]
    source = r.choice([{"resourceClaimName": "shared"}, {"resourceClaimTemplateName": "t"}])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"nodeName": f"n{i}", "resourceClaims": [{"name": "gpu", **source}],
                     "containers": [{"name": "c", "image": "i", "resources": {"claims": [{"name": "gpu"}]}}]},
            "status": {"phase": "Running"}}


@pytest.mark.parametrize("seed", [3, 7])
@pytest.mark.parametrize("scope", ["set", "file"])
def test_pods_alike_but_for_suppressions_queue_or_identity(tmp_path: Path, seed: int, scope: str) -> None:
    r = random.Random(seed)
    items = copy.deepcopy(_SET) + [_pod(r, i) for i in range(24)]
    r.shuffle(items)
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=2))
    grouped = _streamed(path, tmp_path, scope)
    alone = _each_alone(path, scope)
    assert grouped.to_dict() == alone.to_dict()
    assert grouped.suppressed and any(f.count > 1 for f in grouped.findings)
