"""What the per-object rules read of a workload: a key shared by pods that differ only in identity.

In a cluster export the pods of one ReplicaSet, Job or StatefulSet are the same object except for
their names, uid, node, status, timestamps and hash labels. The engine evaluates the per-object
rules once per key and gives every object of the key the same hits (its own name, namespace and
line go into the findings). The fields left out are ones no per-object rule reads;
``tests/guardrails/test_shape_memo.py`` mutates each of them and asserts the findings do not
change except in the object's identity, and compares memoized audits with unmemoized ones.
"""

from __future__ import annotations

import json
from typing import Any

from dra_constructs._safe_load import _orjson  # (None without orjson: nothing is memoized)
from dra_constructs.guardrails.manifest import Manifest

__all__ = ["IDENTITY_LABELS", "IDENTITY_METADATA", "MEMOIZED_KINDS", "POD_IDENTITY_SPEC", "shape_key"]

#: Kinds whose objects are memoized: workloads (their per-object rules read the pod spec, labels,
#: annotations and namespace, never the object's name). Other kinds (DeviceClass, Namespace,
#: ConfigMap...) have rules that print their name, and a cluster holds few of them.
MEMOIZED_KINDS = frozenset({"Pod", "PodTemplate", "Deployment", "ReplicaSet", "ReplicationController",
                            "StatefulSet", "DaemonSet", "Job", "CronJob"})

#: ``metadata`` fields that name one object or record its history (no per-object rule reads them).
IDENTITY_METADATA = frozenset({
    "name", "generateName", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "ownerReferences", "selfLink",
})

#: Labels controllers put on their pods to tell them apart (hashes, indexes, owner uids).
IDENTITY_LABELS = frozenset({
    "pod-template-hash", "controller-revision-hash", "statefulset.kubernetes.io/pod-name",
    "apps.kubernetes.io/pod-index", "controller-uid", "batch.kubernetes.io/controller-uid",
    "batch.kubernetes.io/job-completion-index",
})

#: ``spec`` fields of a Pod (not of a template) the scheduler or controller fills per pod.
POD_IDENTITY_SPEC = frozenset({"nodeName", "hostname"})

#: The projected service-account token volume the API server adds to every pod, with a random
#: name suffix (``kube-api-access-x7k2p``); no rule reads volumes or volume mounts. It is left out
#: (and a list it leaves empty) so that pods of one controller share a key.
_TOKEN_VOLUME = "kube-api-access-"


def _without_token_mounts(container: Any) -> Any:
    if not isinstance(container, dict):
        return container
    mounts = container.get("volumeMounts")
    if not isinstance(mounts, list):
        return container
    kept = [v for v in mounts if not _is_token(v)]
    if len(kept) == len(mounts):
        return container
    out = {**container, "volumeMounts": kept}
    if not kept:
        del out["volumeMounts"]
    return out


def _is_token(volume: Any) -> bool:
    return isinstance(volume, dict) and str(volume.get("name", "")).startswith(_TOKEN_VOLUME)


def _pod_spec(spec: dict[str, Any]) -> dict[str, Any]:
    out = {key: value for key, value in spec.items() if key not in POD_IDENTITY_SPEC}
    volumes = out.get("volumes")
    if isinstance(volumes, list) and any(_is_token(v) for v in volumes):
        out["volumes"] = [v for v in volumes if not _is_token(v)]
        if not out["volumes"]:
            del out["volumes"]
        for group in ("containers", "initContainers", "ephemeralContainers"):
            containers = out.get(group)
            if isinstance(containers, list):
                out[group] = [_without_token_mounts(c) for c in containers]
    return out


def shape_key(m: Manifest) -> bytes | None:
    """The object as the per-object rules see it (file included), or ``None``: not memoized.

    ``None`` for kinds outside :data:`MEMOIZED_KINDS` and for values orjson cannot write
    losslessly (non-string keys, integers past 64 bits, YAML timestamps, which it would write as
    the string a quoted value gives, NaN and infinity, which it writes as ``null``): those objects
    are checked on their own.
    Key order is kept (not sorted): two objects share a key only when their texts agree.
    """
    if _orjson is None or m.kind not in MEMOIZED_KINDS:
        return None
    obj = m.obj
    view: dict[str, Any] = {key: value for key, value in obj.items() if key != "status"}
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        meta = {key: value for key, value in metadata.items() if key not in IDENTITY_METADATA}
        labels = meta.get("labels")
        if isinstance(labels, dict) and not IDENTITY_LABELS.isdisjoint(labels):
            meta["labels"] = {key: value for key, value in labels.items() if key not in IDENTITY_LABELS}
            if not meta["labels"]:
                del meta["labels"]  # labels: {} reads as no labels
        view["metadata"] = meta
    spec = obj.get("spec")
    if m.kind == "Pod" and isinstance(spec, dict):
        view["spec"] = _pod_spec(spec)
    try:
        key = bytes(_orjson.dumps((m.file, view), option=_orjson.OPT_PASSTHROUGH_DATETIME))
    except (TypeError, _orjson.JSONEncodeError):
        return None
    if b"null" in key and not _finite(view):
        return None
    return key


def _finite(view: dict[str, Any]) -> bool:
    """No NaN or infinity in ``view``: orjson writes them as ``null``, which a rule reads otherwise.

    Asked only of keys holding ``null`` (rare in workloads); the standard library refuses both.
    """
    try:
        json.dumps(view, allow_nan=False, check_circular=False)
    except (ValueError, TypeError, RecursionError):
        return False
    return True
