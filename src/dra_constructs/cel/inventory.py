"""Devices to evaluate selectors against: from ResourceSlices (files or the synthetic catalog).

ResourceSlices come as ``kubectl get resourceslices -o yaml`` dumps (``kind: List`` or
``ResourceSliceList`` with ``items``), single objects, multi-document YAML or JSON, in the
``resource.k8s.io`` v1beta1 (device fields under ``basic``), v1beta2 and v1 shapes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from dra_constructs._io import ReadBudget, display_name, read_input
from dra_constructs._safe_load import json_document, no_gc, node_line, yaml_documents
from dra_constructs.cel.slice_shape import dotted_path, slice_problem
from dra_constructs.errors import DraConstructsError

__all__ = ["Device", "devices_from_slices", "load_resource_slices"]

_ATTRIBUTE_KINDS = ("int", "bool", "string", "version")


@dataclass(frozen=True, eq=False)
class Device:
    """One device as the scheduler sees it (``dynamic-resource-allocation/cel.Device`` + identity).

    ``attributes`` maps a qualified or plain attribute name to its typed API value
    (``{"string": "gpu"}``, ``{"version": "9.0.0"}``, ...); ``capacity`` maps a name to its
    quantity string. Plain names belong to the driver's domain.
    """

    driver: str
    pool: str
    name: str
    attributes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    capacity: Mapping[str, str] = field(default_factory=dict)
    allow_multiple_allocations: bool | None = None
    node: str | None = None
    #: ``consumesCounters``: ``(counterSet, {counter: quantity string})`` per consumption.
    consumes_counters: tuple[tuple[str, Mapping[str, str]], ...] = ()
    #: ``taints``: ``{key, value, effect}`` mappings as published.
    taints: tuple[Mapping[str, Any], ...] = ()

    @cached_property
    def id(self) -> str:
        """``driver/pool/device``, the key of match results."""
        return f"{self.driver}/{self.pool}/{self.name}"

    def attribute(self, domain: str, name: str) -> Mapping[str, Any] | None:
        """The typed value of ``domain``/``name`` (plain names live under the driver's domain)."""
        for qualified, value in self.attributes.items():
            found_domain, _, found_name = qualified.rpartition("/")
            if (found_domain or self.driver) == domain and found_name == name:
                return value
        return None


def _documents(text: str, where: str) -> Iterator[tuple[Any, yaml.Node | None]]:
    """Each document with its node (positions; ``None`` for JSON), within the input limits."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            yield json_document(text, where, "content"), None
            return
        except DraConstructsError as error:
            if not error.problem.startswith("malformed JSON"):
                raise
            # YAML is a superset: fall through for JSON-ish YAML
    for document in yaml_documents(text, where, "content"):
        yield document.value, document.node


def _flatten(document: Any, where: str, node: yaml.Node | None,
             path: list[str | int]) -> Iterator[tuple[dict[str, Any], yaml.Node | None, list[str | int]]]:
    if document is None:
        return
    if isinstance(document, list):
        for i, item in enumerate(document):
            yield from _flatten(item, where, _child(node, i), [*path, i])
        return
    if not isinstance(document, dict):
        raise DraConstructsError(where, "document", type(document).__name__, "not a Kubernetes object",
                                 "each YAML document must be a ResourceSlice or a List of them")
    kind = document.get("kind")
    if isinstance(document.get("items"), list) and (kind is None or str(kind).endswith("List")):
        items = _child(node, "items")
        for i, item in enumerate(document["items"]):
            yield from _flatten(item, where, _child(items, i), [*path, "items", i])
        return
    if kind == "ResourceSlice":
        yield document, node, path
        return
    raise DraConstructsError(where, "kind", kind, "not a ResourceSlice",
                             "pass ResourceSlice objects, a ResourceSliceList or a kind: List of them")


def _child(node: yaml.Node | None, key: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        return node.value[key]  # type: ignore[no-any-return]
    if isinstance(node, yaml.MappingNode):
        return next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)
    return None


def _check_slice(resource_slice: dict[str, Any], where: str, node: yaml.Node | None, path: list[str | int]) -> None:
    problem = slice_problem(resource_slice)
    if problem is None:
        return
    keys, expected, value = problem
    at = f"{where}:{node_line(node, keys)}" if node is not None else where
    shown = type(value).__name__ if isinstance(value, dict | list) else value
    got = "null" if value is None else type(value).__name__
    field = dotted_path([*path, *keys])
    raise DraConstructsError(at, field, shown, f"must be {expected}, not {got} (the API server rejects this "
                             "ResourceSlice)", "pass ResourceSlices as the API server serves them "
                             "(kubectl get resourceslices -o yaml)")


def load_resource_slices(paths: str | Path | Iterable[str | Path]) -> list[dict[str, Any]]:
    """Every ResourceSlice in the given files (``"-"`` reads standard input).

    All files together are read within the input limits (docs/input-limits.md); each slice's
    fields are type-checked (wrong types: :class:`DraConstructsError` with file, line and field).
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    slices: list[dict[str, Any]] = []
    budget = ReadBudget()
    with no_gc():
        for path in paths:
            where = display_name(path)
            text = read_input(path, "slices", "ResourceSlice YAML/JSON file", budget=budget)
            for document, node in _documents(text, where):
                for resource_slice, slice_node, slice_path in _flatten(document, where, node, []):
                    _check_slice(resource_slice, where, slice_node, slice_path)
                    slices.append(resource_slice)
    return slices


def _capacity_value(value: Any) -> str:
    if type(value) is dict or isinstance(value, Mapping):  # dict first: the ABC check is slow
        value = value.get("value", value.get("quantity"))
    return "" if value is None else str(value)


_values: dict[Any, dict[str, Any]] = {}


def _shared_value(value: Any) -> dict[str, Any]:
    """An attribute's typed value as a dict of its own, one dict for equal values: a fleet repeats
    ``productName``, ``driverVersion``, ``profile`` on every device (a copy each was ~1 KB a device).
    Nothing mutates them (``Device`` is frozen, the runtime converts into new maps)."""
    if not (type(value) is dict or isinstance(value, Mapping)):
        return {"invalid": value}
    try:
        key = tuple(value.items())
        found = _values.get(key)
    except TypeError:  # an unhashable (malformed) value: a copy of its own
        return dict(value)
    if found is None:
        if len(_values) > 1 << 17:
            _values.clear()
        found = _values[key] = dict(value)
    return found


def devices_from_slices(slices: Iterable[Mapping[str, Any]]) -> list[Device]:
    """The devices of ResourceSlices in any served shape (v1beta1 ``basic``, v1beta2, v1)."""
    devices: list[Device] = []
    for index, resource_slice in enumerate(slices):
        spec = resource_slice.get("spec") if isinstance(resource_slice, Mapping) else None
        name = (resource_slice.get("metadata") or {}).get("name", f"slices[{index}]") if isinstance(
            resource_slice, Mapping) else f"slices[{index}]"
        if not isinstance(spec, Mapping):
            raise DraConstructsError(str(name), "spec", spec, "a ResourceSlice needs a spec",
                                     "pass complete ResourceSlice objects")
        driver = str(spec.get("driver") or "")
        pool = str((spec.get("pool") or {}).get("name") or "")
        node = spec.get("nodeName")
        for device in spec.get("devices") or []:
            if not isinstance(device, Mapping):
                continue
            basic = device.get("basic")
            body: Mapping[str, Any] = basic if isinstance(basic, Mapping) else device
            attributes = {str(k): _shared_value(v) for k, v in (body.get("attributes") or {}).items()}
            capacity = {str(k): _capacity_value(v) for k, v in (body.get("capacity") or {}).items()}
            multi = body.get("allowMultipleAllocations", device.get("allowMultipleAllocations"))
            devices.append(Device(driver, pool, str(device.get("name") or ""), attributes, capacity,
                                  None if multi is None else bool(multi), None if node is None else str(node),
                                  _consumptions(body.get("consumesCounters")), _taints(body.get("taints"))))
    return devices


def _consumptions(value: Any) -> tuple[tuple[str, Mapping[str, str]], ...]:
    """``consumesCounters`` as ``(counterSet, {counter: quantity})`` (malformed entries dropped)."""
    if not isinstance(value, list):
        return ()
    found = []
    for entry in value:
        if (type(entry) is dict or isinstance(entry, Mapping)) and isinstance(entry.get("counters"), Mapping):
            counters = {str(k): _capacity_value(v) for k, v in entry["counters"].items()}
            found.append((str(entry.get("counterSet") or ""), counters))
    return tuple(found)


def _taints(value: Any) -> tuple[Mapping[str, Any], ...]:
    return tuple(dict(t) for t in value if isinstance(t, Mapping)) if isinstance(value, list) else ()
