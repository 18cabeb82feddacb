"""Snapshots (YAML, one file per target) and strict schema validation for 1.32, 1.33 and 1.34.

The runtime zipapp changes with every edit of the agent's code, so the snapshot shows its hash
and size as placeholders (the ConfigMap name, the pod annotation and the env var the pod checks
the mounted zipapp against carry it too); that the
hash follows the bytes is tested in test_construct.py and test_runtime_carried.py.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

import kubernetes_validate
import pytest
import yaml
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from dra_constructs.constructs.sanitizer._agent_spec import RUNTIME_SHA_ENV
from dra_constructs.constructs.sanitizer.construct import RUNTIME_HASH_ANNOTATION
from dra_constructs.target import Target

from .helpers import VERSIONS, build


class YamlSnapshot(SingleFileSnapshotExtension):
    """One readable YAML file per snapshot."""

    file_extension = "yaml"
    _write_mode = WriteMode.TEXT


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (the agent's config.yaml) as readable ``|`` blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def normalized(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The manifests with the runtime's bytes and hash replaced by placeholders."""
    out = copy.deepcopy(docs)
    config_map = next(d for d in out if d["kind"] == "ConfigMap")
    old_name = config_map["metadata"]["name"]
    new_name = old_name.rsplit("-", 1)[0] + "-<bundle-hash>"
    config_map["metadata"]["name"] = new_name
    config_map["binaryData"]["agent.pyz"] = "<zipapp: base64, see test_runtime_carried.py>"
    daemon_set = next(d for d in out if d["kind"] == "DaemonSet")
    template = daemon_set["spec"]["template"]
    template["metadata"]["annotations"][RUNTIME_HASH_ANNOTATION] = "<sha256 of the zipapp>"
    for entry in template["spec"]["containers"][0]["env"]:
        if entry["name"] == RUNTIME_SHA_ENV:
            entry["value"] = "<sha256 of the zipapp>"
    for volume in template["spec"]["volumes"]:
        if volume.get("configMap", {}).get("name") == old_name:
            volume["configMap"]["name"] = new_name
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_snapshot(version: str, snapshot: SnapshotAssertion) -> None:
    _, docs = build(version)
    text = yaml.dump_all(normalized(docs), Dumper=_BlockDumper, sort_keys=True)
    assert text == snapshot.use_extension(YamlSnapshot)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_object_is_valid_for_the_target(version: str) -> None:
    _, docs = build(version, chart_namespace="user-default")
    for doc in docs:
        kubernetes_validate.validate(doc, Target.parse(version).schema_version, strict=True)


def test_the_zipapp_is_really_in_the_configmap() -> None:
    _, docs = build()
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    data = base64.b64decode(config_map["binaryData"]["agent.pyz"])
    assert data[:2] == b"PK"  # a zip archive
    assert config_map["immutable"] is True
