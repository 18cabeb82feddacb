"""The part of Kueue's ``Configuration`` the tenants emit, as a JSON schema written by hand from Kueue's types.

Kueue's ``Configuration`` is not a CRD (the manager reads it from a ConfigMap at start), so
``../shared/schemas/kueue/`` has no schema for it; and the counter sources live there, not in the
ClusterQueue CRD (whose ``nominalQuota`` is a Quantity either way). Written from
kubernetes-sigs/kueue v0.19.2 (8eab6877), ``apis/config/v1beta2/configuration_types.go``:
``Configuration.FeatureGates map[string]bool``, ``Resources.DeviceClassMappings``,
``DeviceClassMapping{name, deviceClassNames, sources}``, ``DeviceClassSourceConfig{counter, capacity}``,
``DeviceClassCounterSource{name, driver, deviceSelector}`` (``resourcev1.DeviceSelector{cel{expression}}``,
``DeviceClassCapacitySource`` the same with a qualified ``name``); required fields are those without
``omitempty``. The rules ``pkg/config/validation.go`` (``validateDeviceClassMappings``) adds are in
:func:`validate_configuration` below (sizes, names, one source type per entry, no counter and capacity
mix, a DeviceClass in one mapping unless both count different counters). Strict: an unknown field
is an error (Kueue's strict decoding of its configuration refuses it too).
"""

from __future__ import annotations

import re
from typing import Any

import jsonschema

_SELECTOR = {"type": "object", "additionalProperties": False, "required": ["cel"], "properties": {
    "cel": {"type": "object", "additionalProperties": False, "required": ["expression"],
            "properties": {"expression": {"type": "string"}}}}}
_SOURCE = {"type": "object", "additionalProperties": False, "required": ["name", "driver", "deviceSelector"],
           "properties": {"name": {"type": "string"}, "driver": {"type": "string"}, "deviceSelector": _SELECTOR}}

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "config.kueue.x-k8s.io/v1beta2"},
        "kind": {"const": "Configuration"},
        "featureGates": {"type": "object", "additionalProperties": {"type": "boolean"}},
        "resources": {"type": "object", "additionalProperties": False, "properties": {
            "deviceClassMappings": {"type": "array", "items": {
                "type": "object", "additionalProperties": False, "required": ["name", "deviceClassNames"],
                "properties": {
                    "name": {"type": "string"},
                    "deviceClassNames": {"type": "array", "items": {"type": "string"}},
                    "sources": {"type": "array", "items": {
                        "type": "object", "additionalProperties": False,
                        "properties": {"counter": _SOURCE, "capacity": _SOURCE}}},
                }}},
        }},
    },
}

#: Gates of v0.19.2 ``pkg/features/kube_features.go`` that concern DRA (an unknown gate stops the manager).
KNOWN_DRA_GATES_019 = frozenset({"KueueDRAIntegration", "KueueDRAIntegrationExtendedResource",
                                 "KueueDRARejectWorkloadsWhenDRADisabled", "KueueDRAIntegrationPartitionableDevices",
                                 "KueueDRAIntegrationConsumableCapacity"})

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def validate_configuration(config: dict[str, Any]) -> None:
    """Raise ``ValueError`` where Kueue 0.19 would refuse ``config`` at start."""
    jsonschema.validate(config, SCHEMA)
    unknown = set(config.get("featureGates", {})) - KNOWN_DRA_GATES_019
    if unknown:
        raise ValueError(f"featureGates: unknown to Kueue 0.19: {sorted(unknown)}")
    mappings = config.get("resources", {}).get("deviceClassMappings", [])
    if len(mappings) > 16:
        raise ValueError("deviceClassMappings: must have at most 16 items")
    names: set[str] = set()
    counters_of: dict[str, set[str]] = {}
    for i, mapping in enumerate(mappings):
        if mapping["name"] in names:
            raise ValueError(f"deviceClassMappings[{i}].name: duplicate")
        names.add(mapping["name"])
        if not 0 < len(mapping["deviceClassNames"]) <= 8:
            raise ValueError(f"deviceClassMappings[{i}].deviceClassNames: 1 to 8 classes")
        sources = mapping.get("sources", [])
        counter = next((s["counter"]["name"] for s in sources[:1] if "counter" in s), "")
        for source in sources:
            if len(source) != 1:
                raise ValueError(f"deviceClassMappings[{i}].sources: exactly one source type must be set per entry")
            body = source.get("counter") or source.get("capacity")
            if "counter" in source and not _DNS_LABEL.match(body["name"]):
                raise ValueError(f"deviceClassMappings[{i}]: counter name is not a DNS label")
            if len(body["driver"]) > 63 or not _SUBDOMAIN.match(body["driver"]):
                raise ValueError(f"deviceClassMappings[{i}]: driver is not a DNS subdomain of <= 63 characters")
            if not body["deviceSelector"]["cel"]["expression"]:
                raise ValueError(f"deviceClassMappings[{i}]: deviceSelector.cel.expression: Required value")
        if {"counter", "capacity"} <= {k for s in sources for k in s}:
            raise ValueError(f"deviceClassMappings[{i}].sources: cannot mix counter and capacity sources")
        for device_class in mapping["deviceClassNames"]:
            if device_class in counters_of:
                if not counter or not counters_of[device_class] or counter in counters_of[device_class]:
                    raise ValueError(f"deviceClassMappings[{i}]: device class {device_class} already mapped")
                counters_of[device_class].add(counter)
            else:
                counters_of[device_class] = {counter} if counter else set()
