"""cel-cpp type-checking environments of the DRA selector, one per target version.

The ``device`` variable is an object (``kubernetes.DRADevice``) in the API server. cel-cpp
declares objects through protobuf descriptors, and a protobuf map cannot hold a map, so the
object is declared twice over, as cel-cpp resolves the longest declared qualified name first:

* ``device`` is a message ``kubernetes.DRADevice`` (so ``device.attrs`` fails with "undefined
  field", ``has(device.driver)`` and ``cel.bind(d, device, ...)`` work);
* ``device.attributes`` (``map(string, map(string, dyn))``) and ``device.capacity``
  (``map(string, map(string, kubernetes.Quantity))``) are variables with the exact types.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cache
from typing import Any

from cel_expr_python import cel
from google.protobuf import descriptor_pb2, descriptor_pool, struct_pb2

from dra_constructs.cel._decls import CIDR, IP, QUANTITY, env_yaml
from dra_constructs.target import Target

__all__ = ["EnvKey", "check_env", "check_env_with", "env_key"]

_F = descriptor_pb2.FieldDescriptorProto
_LOCK = threading.Lock()


@dataclass(frozen=True)
class EnvKey:
    """What distinguishes two DRA CEL environments."""

    target: Target
    allow_multiple_allocations: bool
    qualified: bool = True  # declare the exact-typed ``device.attributes``/``device.capacity``


def env_key(target: Target, allow_multiple_allocations: bool | None = None) -> EnvKey:
    """The environment of ``target`` (patch level only matters for the cost estimator)."""
    multi = allow_multiple_allocations
    if multi is None:
        multi = target.cel_has_allow_multiple_allocations
    return EnvKey(Target(minor=target.minor), multi)


def device_pool(allow_multiple_allocations: bool, *, with_struct: bool = True) -> descriptor_pool.DescriptorPool:
    """A descriptor pool with ``kubernetes.DRADevice`` (attribute maps as ``google.protobuf.Struct``)."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(struct_pb2.DESCRIPTOR.serialized_pb)
    file = descriptor_pb2.FileDescriptorProto(
        name="dra_constructs/dra_device.proto", package="kubernetes", syntax="proto3",
        dependency=["google/protobuf/struct.proto"],
    )
    message = file.message_type.add(name="DRADevice")
    message.field.add(name="driver", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    for number, name in ((2, "attributes"), (3, "capacity")):
        entry = message.nested_type.add(name=name.capitalize() + "Entry")
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
        entry.field.add(name="value", number=2, type=_F.TYPE_MESSAGE, label=_F.LABEL_OPTIONAL,
                        type_name=".google.protobuf.Struct")
        message.field.add(name=name, number=number, type=_F.TYPE_MESSAGE, label=_F.LABEL_REPEATED,
                          type_name=f".kubernetes.DRADevice.{entry.name}")
    if allow_multiple_allocations:
        message.field.add(name="allowMultipleAllocations", number=4, type=_F.TYPE_BOOL, label=_F.LABEL_OPTIONAL)
    pool.Add(file)
    del with_struct
    return pool


def attribute_types() -> dict[str, Any]:
    """The exact types of ``device.attributes`` and ``device.capacity``."""
    t = cel.Type
    return {
        "device.attributes": t.Map(t.STRING, t.Map(t.STRING, t.DYN)),
        "device.capacity": t.Map(t.STRING, t.Map(t.STRING, t.AbstractType(QUANTITY))),
    }


@cache
def check_env(key: EnvKey) -> Any:
    """The type-checking environment (declarations only, no function implementations)."""
    return check_env_with(key, ())


def check_env_with(key: EnvKey, extra: tuple[tuple[str, Any], ...]) -> Any:
    """:func:`check_env` with ``extra`` variables (name, ``cel.Type``) declared; not cached."""
    with _LOCK:
        variables: dict[str, Any] = {"device": cel.Type("kubernetes.DRADevice"), **dict(extra)}
        if key.qualified:
            variables.update(attribute_types())
        if key.target.cel_declares_ip_cidr_type_names:
            variables[IP] = cel.Type.Type(cel.Type.AbstractType(IP))
            variables[CIDR] = cel.Type.Type(cel.Type.AbstractType(CIDR))
        config = cel.NewEnvConfigFromYaml(env_yaml(key.target))
        return cel.NewEnv(descriptor_pool=device_pool(key.allow_multiple_allocations), config=config,
                          variables=variables)
