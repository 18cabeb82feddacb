"""The catalog CLI's libyaml dumper writes what PyYAML's pure-Python ``safe_dump_all`` writes."""

from __future__ import annotations

import io
import itertools
from typing import Any, Literal

import pytest
import yaml

from dra_constructs.catalog import GPU_SPECS, catalog_resource_slices
from dra_constructs.catalog.amd import AMD_GPU_SPECS
from dra_constructs.catalog.amd_devices import amd_resource_slices
from dra_constructs.catalog.cli import _DUMPER, dump_slices

VERSIONS = ("v1beta1", "v1beta2", "v1")
# Every shape the CLI offers (resource version x MIG mode x counter layout x network), the models and
# the driver releases (which only drop attributes) taken in turn (24 shapes, 7 models, 3 releases).
# Lists are cut to their first and last entries (every key, value kind and nesting depth of each
# document, not its 1,000th MIG placement): the pure-Python emitter and the generation are the cost.
# The full untrimmed cross product (all models x all 72 shapes, and AMD) was compared once when this
# dumper was chosen (docs/testing.md "fifth round").
MODES: tuple[Literal["static", "dynamic"], ...] = ("static", "dynamic")
SHAPES = list(itertools.product(VERSIONS, MODES, (False, True), (False, True)))
DRIVERS = ("main", "25.8", "0.4")


def _trimmed(node: Any) -> Any:
    """``node`` with every list cut to its first and last entries."""
    if isinstance(node, dict):
        return {k: _trimmed(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_trimmed(v) for v in (node if len(node) <= 2 else [node[0], node[-1]])]
    return node


def _same_bytes(full: list[dict[str, Any]]) -> None:
    slices = [_trimmed(s) for s in full]
    assert slices
    pure = yaml.safe_dump_all(slices, sort_keys=False)
    out = io.StringIO()
    dump_slices(slices, out)
    assert out.getvalue() == pure


@pytest.mark.skipif(_DUMPER is yaml.SafeDumper, reason="PyYAML without libyaml: the CLI uses the pure dumper")
def test_every_nvidia_shape_dumps_byte_identically() -> None:
    keys = [s.key for s in GPU_SPECS]
    for i, (version, mode, split, network) in enumerate(SHAPES):
        _same_bytes(catalog_resource_slices([keys[i % len(keys)]], resource_version=version, mig_mode=mode,
                                            split_counter_sets=split, network=network,
                                            nvidia_driver=DRIVERS[i % len(DRIVERS)]))


@pytest.mark.skipif(_DUMPER is yaml.SafeDumper, reason="PyYAML without libyaml: the CLI uses the pure dumper")
@pytest.mark.parametrize("version", VERSIONS)
def test_every_amd_shape_dumps_byte_identically(version: str) -> None:
    _same_bytes(amd_resource_slices([s.key for s in AMD_GPU_SPECS], resource_version=version))


def test_the_fallback_dumper_writes_safe_dump_alls_bytes() -> None:
    slices = catalog_resource_slices([GPU_SPECS[0].key], resource_version="v1")
    out = io.StringIO()
    dump_slices(slices, out, dumper=yaml.SafeDumper)
    assert out.getvalue() == yaml.safe_dump_all(slices, sort_keys=False)
