"""Protocol-buffer schema of CEL's checked AST (``cel.expr.CheckedExpr``), built at import time.

``cel_expr_python`` serializes a compiled expression as a ``google.protobuf.Any`` holding a
``cel.expr.CheckedExpr`` (the AST, the type of every node and the overload every call resolved
to), and can deserialize one into a runtime environment. No installed package ships the
``cel.expr`` Python bindings, so the message descriptors are declared here from the published
``cel/expr/syntax.proto`` and ``checked.proto`` field numbers; decoding and encoding are done by
the ``protobuf`` runtime. Only the schema is written by hand, no wire-format code.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, empty_pb2, message_factory, struct_pb2

__all__ = ["CheckedExpr", "Constant", "Expr", "Reference", "Type", "decode_checked", "decode_type", "encode_checked"]

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "int64": _F.TYPE_INT64, "uint64": _F.TYPE_UINT64, "int32": _F.TYPE_INT32, "bool": _F.TYPE_BOOL,
    "string": _F.TYPE_STRING, "bytes": _F.TYPE_BYTES, "double": _F.TYPE_DOUBLE,
}

# message -> [(field name, number, type, label, oneof index or None)]; "*T" = repeated T,
# "map<K,V>" = map field; message names are relative to package ``cel.expr``.
_SCHEMA: dict[str, list[tuple[str, int, str, int | None]]] = {
    "Expr": [("id", 2, "int64", None), ("const_expr", 3, "Constant", 0), ("ident_expr", 4, "Expr.Ident", 0),
             ("select_expr", 5, "Expr.Select", 0), ("call_expr", 6, "Expr.Call", 0),
             ("list_expr", 7, "Expr.CreateList", 0), ("struct_expr", 8, "Expr.CreateStruct", 0),
             ("comprehension_expr", 9, "Expr.Comprehension", 0)],
    "Expr.Ident": [("name", 1, "string", None)],
    "Expr.Select": [("operand", 1, "Expr", None), ("field", 2, "string", None), ("test_only", 3, "bool", None)],
    "Expr.Call": [("target", 1, "Expr", None), ("function", 2, "string", None), ("args", 3, "*Expr", None)],
    "Expr.CreateList": [("elements", 1, "*Expr", None), ("optional_indices", 2, "*int32", None)],
    "Expr.CreateStruct": [("message_name", 1, "string", None), ("entries", 2, "*Expr.CreateStruct.Entry", None)],
    "Expr.CreateStruct.Entry": [("id", 1, "int64", None), ("field_key", 2, "string", 0), ("map_key", 3, "Expr", 0),
                                ("value", 4, "Expr", None), ("optional_entry", 5, "bool", None)],
    "Expr.Comprehension": [("iter_var", 1, "string", None), ("iter_range", 2, "Expr", None),
                           ("accu_var", 3, "string", None), ("accu_init", 4, "Expr", None),
                           ("loop_condition", 5, "Expr", None), ("loop_step", 6, "Expr", None),
                           ("result", 7, "Expr", None), ("iter_var2", 8, "string", None)],
    "Constant": [("null_value", 1, ".google.protobuf.NullValue", 0), ("bool_value", 2, "bool", 0),
                 ("int64_value", 3, "int64", 0), ("uint64_value", 4, "uint64", 0),
                 ("double_value", 5, "double", 0), ("string_value", 6, "string", 0),
                 ("bytes_value", 7, "bytes", 0)],
    "SourceInfo": [("syntax_version", 1, "string", None), ("location", 2, "string", None),
                   ("line_offsets", 3, "*int32", None), ("positions", 4, "map<int64,int32>", None),
                   ("macro_calls", 5, "map<int64,Expr>", None)],
    "Type": [("dyn", 1, ".google.protobuf.Empty", 0), ("null", 2, ".google.protobuf.NullValue", 0),
             ("primitive", 3, "int32", 0), ("wrapper", 4, "int32", 0), ("well_known", 5, "int32", 0),
             ("list_type", 6, "Type.ListType", 0), ("map_type", 7, "Type.MapType", 0),
             ("function", 8, "Type.FunctionType", 0), ("message_type", 9, "string", 0),
             ("type_param", 10, "string", 0), ("type", 11, "Type", 0), ("error", 12, ".google.protobuf.Empty", 0),
             ("abstract_type", 14, "Type.AbstractType", 0)],
    "Type.ListType": [("elem_type", 1, "Type", None)],
    "Type.MapType": [("key_type", 1, "Type", None), ("value_type", 2, "Type", None)],
    "Type.FunctionType": [("result_type", 1, "Type", None), ("arg_types", 2, "*Type", None)],
    "Type.AbstractType": [("name", 1, "string", None), ("parameter_types", 2, "*Type", None)],
    "Reference": [("name", 1, "string", None), ("overload_id", 3, "*string", None), ("value", 4, "Constant", None)],
    "CheckedExpr": [("reference_map", 2, "map<int64,Reference>", None), ("type_map", 3, "map<int64,Type>", None),
                    ("expr", 4, "Expr", None), ("source_info", 5, "SourceInfo", None),
                    ("expr_version", 6, "string", None)],
}

#: Primitive type codes of ``cel.expr.Type.PrimitiveType`` (the field is declared as int32 here).
PRIMITIVES = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}
#: Well-known type codes of ``cel.expr.Type.WellKnownType``.
WELL_KNOWN = {1: "any", 2: "google.protobuf.Timestamp", 3: "google.protobuf.Duration"}


def _field_type(message: descriptor_pb2.DescriptorProto, name: str, number: int, spec: str,
                oneof: int | None, nested_prefix: str) -> None:
    field = message.field.add(name=name, number=number, label=_F.LABEL_OPTIONAL)
    if spec.startswith("map<"):
        key, value = spec[4:-1].split(",")
        entry = message.nested_type.add(name="".join(p.capitalize() for p in name.split("_")) + "Entry")
        entry.options.map_entry = True
        for entry_name, entry_number, entry_spec in (("key", 1, key), ("value", 2, value)):
            _field_type(entry, entry_name, entry_number, entry_spec, None, "")
        field.label = _F.LABEL_REPEATED
        field.type = _F.TYPE_MESSAGE
        field.type_name = f".cel.expr.{nested_prefix}{entry.name}"
    else:
        if spec.startswith("*"):
            field.label = _F.LABEL_REPEATED
            spec = spec[1:]
        if spec in _SCALARS:
            field.type = _SCALARS[spec]
        elif spec == ".google.protobuf.NullValue":
            field.type = _F.TYPE_ENUM
            field.type_name = spec
        else:
            field.type = _F.TYPE_MESSAGE
            field.type_name = spec if spec.startswith(".") else f".cel.expr.{spec}"
    if oneof is not None:
        field.oneof_index = oneof


def _build_pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for dependency in (struct_pb2, empty_pb2):
        pool.AddSerializedFile(dependency.DESCRIPTOR.serialized_pb)
    file = descriptor_pb2.FileDescriptorProto(
        name="dra_constructs/cel_expr.proto", package="cel.expr", syntax="proto3",
        dependency=["google/protobuf/struct.proto", "google/protobuf/empty.proto"],
    )
    protos: dict[str, descriptor_pb2.DescriptorProto] = {}
    for full_name in _SCHEMA:  # parents are listed before their nested messages
        parent, _, short = full_name.rpartition(".")
        container = protos[parent].nested_type if parent else file.message_type
        protos[full_name] = container.add(name=short)
    for full_name, fields in _SCHEMA.items():
        proto = protos[full_name]
        if any(oneof is not None for *_, oneof in fields):
            proto.oneof_decl.add(name="kind")
        for name, number, spec, oneof in fields:
            _field_type(proto, name, number, spec, oneof, full_name + ".")
    pool.Add(file)
    return pool


POOL = _build_pool()


def _message(name: str) -> Any:
    return message_factory.GetMessageClass(POOL.FindMessageTypeByName(f"cel.expr.{name}"))


CheckedExpr = _message("CheckedExpr")
Expr = _message("Expr")
Constant = _message("Constant")
Type = _message("Type")
Reference = _message("Reference")

_ANY_URL = b"type.googleapis.com/cel.expr.CheckedExpr"


def decode_checked(serialized: bytes) -> Any:
    """The ``CheckedExpr`` inside the ``Any`` that ``Expression.serialize()`` returns."""
    return _parse(CheckedExpr(), _any_payload(serialized))


def decode_type(serialized: bytes) -> Any:
    """A serialized ``cel.expr.Type``, nested as deep as it is (a literal's type may nest 248 levels)."""
    return _parse(Type(), serialized)


def _parse(message: Any, value: bytes) -> Any:
    try:
        message.ParseFromString(value)
    except Exception as error:  # upb's default depth limit (100 messages) on an AST nested deeper
        if "MaxDepth" not in str(error):
            raise
        from google._upb import _message as upb

        upb.SetAllowOversizeProtos(True)  # the only switch upb has for its depth limit
        try:
            message.ParseFromString(value)
        finally:
            upb.SetAllowOversizeProtos(False)
    return message


def encode_checked(checked: Any) -> bytes:
    """Wrap ``checked`` in a ``google.protobuf.Any``, as ``Env.deserialize`` expects."""
    from google.protobuf import any_pb2

    wrapper = any_pb2.Any(type_url=_ANY_URL.decode(), value=checked.SerializeToString())
    return bytes(wrapper.SerializeToString())


def _any_payload(serialized: bytes) -> bytes:
    from google.protobuf import any_pb2

    wrapper = any_pb2.Any()
    wrapper.ParseFromString(serialized)
    return bytes(wrapper.value)
