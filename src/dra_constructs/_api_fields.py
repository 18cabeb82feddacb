"""The field names and JSON types of PodSpec and Container, per Kubernetes minor (1.32-1.37).

A lightweight stand-in for the API schema at construction time: the full schema
(``kubernetes-validate``, the generated L1) is a development dependency only. Copied from the
official JSON schema shipped in ``kubernetes-validate`` (``tests/core/test_api_fields.py``
compares this table with it for every supported minor, so it cannot drift).
"""

from __future__ import annotations

__all__ = ["CONTAINER_FIELDS", "POD_SPEC_FIELDS", "fields_for"]

#: field -> (JSON type, first minor, last minor) of ``io.k8s.api.core.v1.PodSpec``.
POD_SPEC_FIELDS: dict[str, tuple[str, int, int]] = {
    "activeDeadlineSeconds": ("integer", 32, 37),
    "affinity": ("object", 32, 37),
    "automountServiceAccountToken": ("boolean", 32, 37),
    "containers": ("array", 32, 37),
    "dnsConfig": ("object", 32, 37),
    "dnsPolicy": ("string", 32, 37),
    "enableServiceLinks": ("boolean", 32, 37),
    "ephemeralContainers": ("array", 32, 37),
    "evictionResponders": ("array", 37, 37),
    "hostAliases": ("array", 32, 37),
    "hostIPC": ("boolean", 32, 37),
    "hostNetwork": ("boolean", 32, 37),
    "hostPID": ("boolean", 32, 37),
    "hostUsers": ("boolean", 32, 37),
    "hostname": ("string", 32, 37),
    "hostnameOverride": ("string", 34, 37),
    "imagePullSecrets": ("array", 32, 37),
    "initContainers": ("array", 32, 37),
    "nodeName": ("string", 32, 37),
    "nodeSelector": ("object", 32, 37),
    "os": ("object", 32, 37),
    "overhead": ("object", 32, 37),
    "preemptionPolicy": ("string", 32, 37),
    "priority": ("integer", 32, 37),
    "priorityClassName": ("string", 32, 37),
    "readinessGates": ("array", 32, 37),
    "resourceClaims": ("array", 32, 37),
    "resources": ("object", 32, 37),
    "restartPolicy": ("string", 32, 37),
    "runtimeClassName": ("string", 32, 37),
    "schedulerName": ("string", 32, 37),
    "schedulingGates": ("array", 32, 37),
    "schedulingGroup": ("object", 36, 37),
    "securityContext": ("object", 32, 37),
    "serviceAccount": ("string", 32, 37),
    "serviceAccountName": ("string", 32, 37),
    "setHostnameAsFQDN": ("boolean", 32, 37),
    "shareProcessNamespace": ("boolean", 32, 37),
    "subdomain": ("string", 32, 37),
    "terminationGracePeriodSeconds": ("integer", 32, 37),
    "tolerations": ("array", 32, 37),
    "topologySpreadConstraints": ("array", 32, 37),
    "volumes": ("array", 32, 37),
    "workloadRef": ("object", 35, 35),
}

#: field -> (JSON type, first minor, last minor) of ``io.k8s.api.core.v1.Container``.
CONTAINER_FIELDS: dict[str, tuple[str, int, int]] = {
    "args": ("array", 32, 37),
    "command": ("array", 32, 37),
    "env": ("array", 32, 37),
    "envFrom": ("array", 32, 37),
    "image": ("string", 32, 37),
    "imagePullPolicy": ("string", 32, 37),
    "lifecycle": ("object", 32, 37),
    "livenessProbe": ("object", 32, 37),
    "name": ("string", 32, 37),
    "ports": ("array", 32, 37),
    "readinessProbe": ("object", 32, 37),
    "resizePolicy": ("array", 32, 37),
    "resources": ("object", 32, 37),
    "restartPolicy": ("string", 32, 37),
    "restartPolicyRules": ("array", 34, 37),
    "securityContext": ("object", 32, 37),
    "startupProbe": ("object", 32, 37),
    "stdin": ("boolean", 32, 37),
    "stdinOnce": ("boolean", 32, 37),
    "terminationMessagePath": ("string", 32, 37),
    "terminationMessagePolicy": ("string", 32, 37),
    "tty": ("boolean", 32, 37),
    "volumeDevices": ("array", 32, 37),
    "volumeMounts": ("array", 32, 37),
    "workingDir": ("string", 32, 37),
}


def fields_for(table: dict[str, tuple[str, int, int]], minor: int) -> dict[str, str]:
    """The fields (name -> JSON type) that exist in Kubernetes 1.``minor``."""
    return {name: kind for name, (kind, first, last) in table.items() if first <= minor <= last}
