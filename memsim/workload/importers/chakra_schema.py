"""Chakra's execution-trace schema, declared here and built with ``protobuf`` alone.

The messages are those of MLCommons Chakra's published schema (``schema/protobuf/et_def.proto``,
package ``ChakraProtoMsg``, proto3; the same field names and numbers as ``mlc-chakra`` 1.0's
``et_def_pb2``), so a trace written by Chakra's tools reads here and a trace written here reads
there. Declaring them avoids ``mlc-chakra``, whose dependencies (HolisticTraceAnalysis, and through
it JupyterLab and plotly) would make the install several hundred MB for a 30-line schema. A trace
file is the ``GlobalMetadata`` message, then one ``Node`` after another, each preceded by its length
as a varint (Chakra's ``protolib.encodeMessage``).
"""
from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from types import SimpleNamespace

from memsim.core.errors import ConfigError

PACKAGE = "ChakraProtoMsg"
# Each attribute value is one of: (name, number, scalar type); the list messages hold `repeated` of it.
SCALARS = ("double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
           "sfixed32", "sfixed64", "bool", "string", "bytes")
NODE_TYPES = ("INVALID_NODE", "METADATA_NODE", "MEM_LOAD_NODE", "MEM_STORE_NODE", "COMP_NODE", "COMM_SEND_NODE",
              "COMM_RECV_NODE", "COMM_COLL_NODE")
COLLECTIVES = ("ALL_REDUCE", "REDUCE", "ALL_GATHER", "GATHER", "SCATTER", "BROADCAST", "ALL_TO_ALL",
               "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK", "BARRIER")
# message: (field name, number, type, repeated); a capitalised type is a message or enum of the package
MESSAGES: dict[str, tuple[tuple[str, int, str, bool], ...]] = {
    "GlobalMetadata": (("version", 1, "string", False), ("attr", 2, "AttributeProto", True)),
    "Node": (("id", 1, "uint64", False), ("name", 2, "string", False), ("type", 3, "NodeType", False),
             ("ctrl_deps", 4, "uint64", True), ("data_deps", 5, "uint64", True),
             ("start_time_micros", 6, "uint64", False), ("duration_micros", 7, "uint64", False),
             ("inputs", 8, "IOInfo", False), ("outputs", 9, "IOInfo", False), ("attr", 10, "AttributeProto", True)),
    "IOInfo": (("values", 1, "string", False), ("shapes", 2, "string", False), ("types", 3, "string", False)),
    "Tensor": (("tensor_id", 1, "uint64", False), ("storage_id", 2, "uint64", False), ("offset", 3, "uint64", False),
               ("num_elem", 4, "uint64", False), ("elem_bytes", 5, "uint64", False), ("device", 6, "string", False)),
}
ENUMS = {"NodeType": NODE_TYPES, "CollectiveCommType": COLLECTIVES}


def _file_descriptor():
    from google.protobuf import descriptor_pb2

    fdp = descriptor_pb2.FileDescriptorProto(name="memsim_chakra_et_def.proto", package=PACKAGE, syntax="proto3")
    fdp_field = descriptor_pb2.FieldDescriptorProto

    def add(message, name: str, number: int, kind: str, repeated: bool, oneof: int | None = None) -> None:
        f = message.field.add(name=name, number=number,
                              label=fdp_field.LABEL_REPEATED if repeated else fdp_field.LABEL_OPTIONAL)
        if kind[0].isupper():
            f.type = fdp_field.TYPE_ENUM if kind in ENUMS else fdp_field.TYPE_MESSAGE
            f.type_name = f".{PACKAGE}.{kind}"
        else:
            f.type = getattr(fdp_field, f"TYPE_{kind.upper()}")
        if oneof is not None:
            f.oneof_index = oneof

    attribute = fdp.message_type.add(name="AttributeProto")
    add(attribute, "name", 1, "string", False)
    add(attribute, "doc_string", 2, "string", False)
    attribute.oneof_decl.add(name="value")
    for i, scalar in enumerate(SCALARS):
        listed = scalar[0].upper() + scalar[1:] + "List"
        add(attribute, f"{scalar}_val", 3 + 2 * i, scalar, False, oneof=0)
        add(attribute, f"{scalar}_list", 4 + 2 * i, listed, False, oneof=0)
        add(fdp.message_type.add(name=listed), "values", 1, scalar, True)
    for name, fields in MESSAGES.items():
        message = fdp.message_type.add(name=name)
        for field in fields:
            add(message, *field)
    for name, values in ENUMS.items():
        enum = fdp.enum_type.add(name=name)
        for number, value in enumerate(values):
            enum.value.add(name=value, number=number)
    return fdp


@cache
def schema() -> SimpleNamespace:
    """The message classes (``GlobalMetadata``, ``Node``, ``AttributeProto``, ...), the enums as
    ``NodeType`` / ``CollectiveCommType`` (with ``Name``/``Value``) and each enum value by name, as
    ``et_def_pb2`` gives them. Needs ``protobuf`` (the ``chakra`` extra)."""
    try:
        from google.protobuf import descriptor_pool, message_factory
        from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper
    except ImportError:
        raise ConfigError("the Chakra importer needs protobuf (pip install '.[chakra]')", field="import") from None
    pool = descriptor_pool.DescriptorPool()  # its own pool: mlc-chakra's et_def.proto may be loaded beside it
    pool.Add(_file_descriptor())
    out = SimpleNamespace()
    for message in pool.FindFileByName("memsim_chakra_et_def.proto").message_types_by_name.values():
        setattr(out, message.name, message_factory.GetMessageClass(message))
    for name, values in ENUMS.items():
        setattr(out, name, EnumTypeWrapper(pool.FindEnumTypeByName(f"{PACKAGE}.{name}")))
        for number, value in enumerate(values):
            setattr(out, value, number)
    return out


def frame(*messages) -> bytes:
    """The messages as a trace file holds them: each its length as a varint, then its bytes."""
    out = bytearray()
    for message in messages:
        data = message.SerializeToString()
        size = len(data)
        while True:
            low, size = size & 0x7F, size >> 7
            out.append(low | (0x80 if size else 0))
            if not size:
                break
        out += data
    return bytes(out)


def split(data: bytes, file: str) -> Iterator[bytes]:
    """The length-delimited messages of a trace file; a length cut short or running past the end is an error."""
    pos = 0
    while pos < len(data):
        size = shift = 0
        while True:
            if pos >= len(data) or shift > 63:
                raise ConfigError("not a Chakra execution trace (a message length is cut short)", file=file)
            byte = data[pos]
            pos += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if pos + size > len(data):
            raise ConfigError(f"not a Chakra execution trace (a message of {size} bytes runs past the end of the "
                              "file)", file=file)
        yield data[pos:pos + size]
        pos += size
