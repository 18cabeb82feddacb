"""What an object holds that a per-object rule could fire on: its facets (pure Python).

A cluster export is mostly ConfigMaps, Services and other objects with no pod spec, no DRA API
and no suppression: every per-object rule returns nothing on them, but calling ~15 rules (each
asking the object's pods, requests, memos) was ~50 us an object. A rule declares
(:attr:`~dra_constructs.guardrails.model.Rule.fires_on`) the facets without which its object
check yields nothing; the engine computes an object's facets once and calls only the rules
that share one with it. A rule without a declaration (any rule not of this pack) is always called.

Each facet is a property the rules themselves read, computed by the same accessors:

``POD``
    :attr:`Manifest.pods` is not empty (a pod spec: a workload's, or one found in a custom kind).
``LOOSE``
    :meth:`Manifest.loose_containers` or :meth:`Manifest.loose_resources` is not empty
    (container-like or ``limits``/``requests`` dicts of custom kinds outside pod specs).
``RESOURCE_API``
    :attr:`Manifest.is_resource_api` (group ``resource.k8s.io``): only such objects have
    :attr:`Manifest.claim_spec`, :meth:`Manifest.requests` or :meth:`Manifest.device_configs`.
``CLASSIC``
    group ``gpu.resource.nvidia.com`` (classic-DRA parameter objects, DRA006 and DRA007).
``SUPPRESSIONS``
    ``metadata.annotations`` holds the suppressions annotation (DRA000; a pod template's is
    read only where there is a pod: ``POD``).
``SHARING_CONFIG``
    kind ``ConfigMap``, apiVersion ``v1``, a string in ``data`` holding ``sharing`` (DRA006 reads a
    device plugin's sharing config there, and only such strings).

The reader of a ``kubectl -o json`` List notes an object's facets from the text it parsed it from,
where the text alone proves them (:func:`note_facets_from_text`: most ConfigMaps and Services).

Which fields each rule reads, and why it needs one of its facets to fire, is written beside its
declaration (``rules/``); ``tests/guardrails/test_rule_facets.py`` calls every rule on objects
without its facets (fixtures under other kinds and API groups, and generated objects) and
asserts it yields nothing, and compares audits with and without the skipping.
"""

from __future__ import annotations

import re

from dra_constructs.guardrails.manifest import DISCOVERED_BY, POD_SPEC_KINDS, Manifest, as_dict
from dra_constructs.guardrails.suppressions import SUPPRESSIONS_ANNOTATION

__all__ = [
    "CLASSIC",
    "CLASSIC_GROUP",
    "LOOSE",
    "POD",
    "RESOURCE_API",
    "SHARING_CONFIG",
    "SUPPRESSIONS",
    "facets",
    "note_facets_from_text",
]

POD = 1
LOOSE = 2
RESOURCE_API = 4
CLASSIC = 8
SUPPRESSIONS = 16
SHARING_CONFIG = 32

#: The API group of classic-DRA (before 1.31) NVIDIA parameter objects.
CLASSIC_GROUP = "gpu.resource.nvidia.com"


#: A key the facets read (one :func:`~.manifest._discover` finds by, or the suppressions annotation) as
#: it shows in JSON text without escapes.
_TEXT_KEYS = re.compile(rb'"(?:' + b"|".join(re.escape(key.encode())
                                             for key in (*DISCOVERED_BY, SUPPRESSIONS_ANNOTATION)) + rb')"')


def note_facets_from_text(m: Manifest, text: bytes) -> None:
    """Note ``m``'s facets (:attr:`Manifest.known_facets`) where ``text``, its own JSON as read, proves them.

    Without a backslash every ``"`` of valid JSON opens or closes a string, so a key ``image`` at any
    depth shows as ``"image"``, and a string holding ``sharing`` holds those bytes: where the text has
    no backslash, none of the keys the facets read and (a ConfigMap) no ``sharing``, the object's
    facets are its API group's alone. A cluster export's ConfigMaps and Services are decided so in
    C searches (~1 us) instead of by the accessors (~9 us an object); other objects are left to
    :func:`facets`.
    """
    if (m.kind in POD_SPEC_KINDS or b"\\" in text or _TEXT_KEYS.search(text) is not None
            or (m.kind == "ConfigMap" and b"sharing" in text)):
        return
    m.know_nothing_discovered()
    m.known_facets = RESOURCE_API if m.is_resource_api else CLASSIC if m.group == CLASSIC_GROUP else 0


def facets(m: Manifest) -> int:
    """The object's facets, a bit set of the constants above."""
    if m.known_facets is not None:
        return m.known_facets
    found = 0
    if m.pods:
        found |= POD
    if m.loose_containers() or m.loose_resources():
        found |= LOOSE
    if m.is_resource_api:
        found |= RESOURCE_API
    elif m.group == CLASSIC_GROUP:
        found |= CLASSIC
    if SUPPRESSIONS_ANNOTATION in as_dict(m.metadata.get("annotations")):
        found |= SUPPRESSIONS
    if m.kind == "ConfigMap" and m.api_version == "v1" and any(
            isinstance(value, str) and "sharing" in value for value in as_dict(m.obj.get("data")).values()):
        found |= SHARING_CONFIG
    return found
