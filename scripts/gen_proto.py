#!/usr/bin/env python3
"""Regenerate the code generated from proto/*.proto.

Usage:
    python scripts/gen_proto.py          # rewrite the generated files
    python scripts/gen_proto.py --check  # exit 1 if the checked-in files are stale

Generated files:

* ``proto/*_pb2.py``, ``*_pb2.pyi``, ``*_pb2_grpc.py``: grpc_tools' Python code.
  The .proto files are compiled as ``feedha/proto/*.proto`` (their installed
  place: ``proto/`` is the package ``feedha.proto``), so generated modules import
  each other as ``from feedha.proto import market_pb2`` and a .proto imports
  another as ``import "feedha/proto/market.proto"``.
* ``adapter/conversion/_market_fields.h``: the field numbers and ready-made tags of the
  ``feedha.v1`` fields that the C extensions (``adapter/formats/feedha_fix/_fastpath.c``, and
  ``adapter/conversion/_orders.c`` for the itch50 blocks) encode by hand. Generating
  it refuses (exit 1, naming the field) when the schema no longer matches what
  those encoders assume: a field missing, of another type or presence, out of
  the encoders' write order, or too high for a one-byte tag.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from google.protobuf.descriptor import Descriptor, FieldDescriptor, FileDescriptor

ROOT: Final = Path(__file__).resolve().parent.parent
PROTO_SUFFIXES: Final = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")
HEADER: Final = "adapter/conversion/_market_fields.h"  # relative to the root
ENCODER: Final = "the C encoders (feedha_fix/_fastpath.c, conversion/_orders.c)"  # what includes HEADER
PACKAGE_DIR: Final = "feedha/proto"  # where proto/ is installed, and the .proto files' include path
MARKET_PROTO: Final = f"{PACKAGE_DIR}/market.proto"

# FieldDescriptor.TYPE_* (the values are fixed by descriptor.proto).
_DOUBLE, _INT64, _BOOL, _STRING, _MESSAGE, _BYTES, _UINT32, _ENUM = 1, 3, 8, 9, 11, 12, 13, 14
_WIRE_TYPES: Final = {
    _INT64: 0,
    _BOOL: 0,
    _UINT32: 0,
    _ENUM: 0,
    _DOUBLE: 1,
    _STRING: 2,
    _BYTES: 2,
    _MESSAGE: 2,
}


class SchemaError(Exception):
    """proto/market.proto no longer has a field the way adapter/formats/feedha_fix/_fastpath.c encodes it."""


@dataclass(frozen=True, slots=True)
class _Field:
    """A field as the C encoder writes it."""

    name: str
    type: int
    repeated: bool = False
    target: str | None = None  # full name of the message or enum type
    optional: bool = False  # explicit presence: written when set, zero included


# What adapter/formats/feedha_fix/_fastpath.c encodes, per message in the order it writes the
# fields. Deterministic serialization writes fields by number, so the numbers
# must rise in this order; every tag is one byte (numbers 1..15).
_ENCODED: Final[dict[str, tuple[_Field, ...]]] = {
    "feedha.v1.MarketUpdate": (
        _Field("symbol", _STRING),
        _Field("event_time_ns", _INT64),
        _Field("publish_time_ns", _INT64),
        _Field("entries", _MESSAGE, repeated=True, target="feedha.v1.Entry"),
        _Field("state", _MESSAGE, target="feedha.v1.SymbolState"),
        _Field("extra", _MESSAGE, repeated=True, target="feedha.v1.MarketUpdate.ExtraEntry"),
        _Field("symbols", _MESSAGE, repeated=True, target="feedha.v1.SymbolUpdate"),
    ),
    "feedha.v1.Entry": (
        _Field("type", _ENUM, target="feedha.v1.EntryType"),
        _Field("price", _DOUBLE),
        _Field("size", _INT64),
        _Field("notional", _DOUBLE),
    ),
    "feedha.v1.SymbolState": (
        _Field("volume", _INT64),
        _Field("high", _DOUBLE),
        _Field("low", _DOUBLE),
        _Field("last", _DOUBLE),
        _Field("vwap", _DOUBLE),
        _Field("trade_count", _INT64),
        _Field("bid", _DOUBLE),
        _Field("ask", _DOUBLE),
        _Field("notional", _DOUBLE),
        _Field("book", _MESSAGE, target="feedha.v1.Book"),
        _Field("session", _MESSAGE, target="feedha.v1.SessionValues"),
    ),
    # The book blocks (fix44's layout; _orders.c writes itch50's).
    "feedha.v1.SymbolUpdate": (
        _Field("symbol", _STRING),
        _Field("trades", _MESSAGE, repeated=True, target="feedha.v1.Entry"),
        _Field("book_changes", _MESSAGE, repeated=True, target="feedha.v1.BookChange"),
        _Field("state", _MESSAGE, target="feedha.v1.SymbolState"),
        _Field("orders", _BYTES),
        _Field("levels", _MESSAGE, repeated=True, target="feedha.v1.PriceLevel"),
        _Field("book_replaced", _BOOL),
    ),
    "feedha.v1.PriceLevel": (
        _Field("side", _ENUM, target="feedha.v1.Side"),
        _Field("price", _DOUBLE),
        _Field("size", _DOUBLE),
        _Field("orders", _INT64),
        _Field("deleted", _BOOL),
    ),
    "feedha.v1.BookChange": (
        _Field("action", _ENUM, target="feedha.v1.BookAction"),
        _Field("side", _ENUM, target="feedha.v1.Side"),
        _Field("level", _UINT32),
        _Field("price", _DOUBLE),
        _Field("size", _DOUBLE),
        _Field("orders", _INT64),
    ),
    "feedha.v1.Book": (
        _Field("level_indexed", _BOOL),
        _Field("depth", _UINT32),
        _Field("bids", _MESSAGE, repeated=True, target="feedha.v1.BookLevel"),
        _Field("asks", _MESSAGE, repeated=True, target="feedha.v1.BookLevel"),
        _Field("orders", _BYTES),
    ),
    "feedha.v1.BookLevel": (
        _Field("price", _DOUBLE),
        _Field("size", _DOUBLE),
        _Field("orders", _INT64),
    ),
    "feedha.v1.SessionValues": (
        *(
            _Field(name, _DOUBLE, optional=True)
            for name in ("volume", "last", "high", "low", "open", "close", "settle", "open_interest", "vwap")
        ),
        _Field("notional", _DOUBLE),
        _Field("traded", _DOUBLE),
        _Field("trades", _INT64),
    ),
    # map<string, double> extra: each pair is one of these.
    "feedha.v1.MarketUpdate.ExtraEntry": (
        _Field("key", _STRING),
        _Field("value", _DOUBLE),
    ),
}
_MAP_ENTRIES: Final = frozenset({"feedha.v1.MarketUpdate.ExtraEntry"})
# Enum values the C code acts on (the state applies trades, bids and asks).
_ENUMS: Final = {"feedha.v1.EntryType": ("ENTRY_TYPE_BID", "ENTRY_TYPE_ASK", "ENTRY_TYPE_TRADE")}


def _compile(source_root: Path, out_root: Path, outputs: list[str]) -> None:
    from grpc_tools import protoc  # dev dependency: only needed to regenerate

    sources = sorted((source_root / "proto").glob("*.proto"))
    if not sources:
        raise SystemExit(f"no .proto files under {source_root / 'proto'}")
    include = Path(protoc.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory() as stage:
        # The schema as it is installed (feedha/proto/*.proto), so the names
        # compiled into the descriptors and the generated imports are the namespace's.
        staged = Path(stage) / PACKAGE_DIR
        staged.mkdir(parents=True)
        for source in sources:
            shutil.copyfile(source, staged / source.name)
        args = [
            "grpc_tools.protoc",
            f"-I{stage}",
            f"-I{include}",
            *outputs,
            *[f"{PACKAGE_DIR}/{p.name}" for p in sources],
        ]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")


def load_market(source_root: Path = ROOT) -> FileDescriptor:
    """Compile ``source_root/proto/*.proto`` and return market.proto's descriptor.

    Args:
        source_root: a directory holding ``proto/*.proto`` (the repository's by default).

    Returns:
        The ``proto/market.proto`` file descriptor, in a pool of its own.
    """
    from google.protobuf import descriptor_pb2, descriptor_pool

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "descriptors.pb"
        _compile(source_root, Path(tmp), [f"--descriptor_set_out={out}", "--include_imports"])
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    return pool.FindFileByName(MARKET_PROTO)


def _checked_field(message: Descriptor, want: _Field) -> FieldDescriptor:
    """The message's field ``want.name``, or SchemaError saying how it differs from ``want``."""
    where = f"{message.full_name}.{want.name}"
    field = message.fields_by_name.get(want.name)
    if field is None:
        raise SchemaError(f"{where} is missing: {ENCODER} encodes it")
    target = field.message_type or field.enum_type
    have = (field.type, field.is_repeated, target.full_name if target is not None else None)
    if have != (want.type, want.repeated, want.target):
        raise SchemaError(
            f"{where} is {_describe(*have)}: {ENCODER} encodes it as "
            f"{_describe(want.type, want.repeated, want.target)}"
        )
    if field.type != _MESSAGE and field.has_presence != want.optional:
        if want.optional:
            raise SchemaError(f"{where} has no presence: {ENCODER} writes it when set, zero included")
        raise SchemaError(f"{where} has explicit presence: {ENCODER} omits it when zero")
    if not 1 <= field.number <= 15:
        raise SchemaError(f"{where} = {field.number}: {ENCODER} writes one-byte tags (1..15)")
    return field


def _describe(field_type: int, repeated: bool, target: str | None) -> str:
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto

    name = FieldDescriptorProto.Type.Name(field_type).removeprefix("TYPE_").lower()  # type: ignore[arg-type]
    return f"{'repeated ' if repeated else ''}{name}{f' {target}' if target else ''}"


def _macro(name: str) -> str:
    return "FH_" + name.removeprefix("feedha.v1.").replace(".", "_").upper()


def _enum_macro(enum: str, value: str) -> str:
    # FH_ENTRYTYPE_BID for feedha.v1.EntryType.ENTRY_TYPE_BID: the type, squashed as the
    # message macros are, then the value without the enum's conventional prefix.
    short = enum.rpartition(".")[2]
    prefix = "".join(f"_{c}" if c.isupper() else c.upper() for c in short).lstrip("_") + "_"
    return f"{_macro(enum)}_{value.removeprefix(prefix)}"


def _message_lines(message: Descriptor) -> list[str]:
    lines = [f"/* {message.full_name} */"]
    previous = 0
    for want in _ENCODED[message.full_name]:
        field = _checked_field(message, want)
        if field.number <= previous:
            raise SchemaError(
                f"{message.full_name}.{want.name} = {field.number} comes after field {previous}: "
                f"{ENCODER} writes the fields in ascending order as they were numbered"
            )
        previous = field.number
        macro = _macro(f"{message.full_name}.{want.name}")
        tag = field.number << 3 | _WIRE_TYPES[want.type]
        lines.append(f"#define {macro} {field.number}")
        lines.append(
            f"#define {macro}_TAG 0x{tag:02x} /* {_describe(want.type, want.repeated, want.target)} */"
        )
    return lines


def _relative_name(file: FileDescriptor, full_name: str) -> list[str]:
    """``full_name``'s path inside market.proto's package (SchemaError when the package moved)."""
    prefix = f"{file.package}."
    if not full_name.startswith(prefix):
        raise SchemaError(f"{MARKET_PROTO} is package {file.package}: {ENCODER} encodes {full_name}")
    return full_name.removeprefix(prefix).split(".")


def _find_message(file: FileDescriptor, full_name: str) -> Descriptor:
    top, *nested = _relative_name(file, full_name)
    message = file.message_types_by_name.get(top)
    for name in nested:
        message = message.nested_types_by_name.get(name) if message is not None else None
    if message is None:
        raise SchemaError(f"{full_name} is missing: {ENCODER} encodes it")
    if full_name in _MAP_ENTRIES and not message.GetOptions().map_entry:
        raise SchemaError(f"{full_name} is not a map entry: {ENCODER} encodes a map")
    return message


def market_fields_header(file: FileDescriptor) -> str:
    """The text of adapter/conversion/_market_fields.h for market.proto's descriptor.

    Args:
        file: the ``proto/market.proto`` descriptor (``proto.market_pb2.DESCRIPTOR``
            or :func:`load_market`'s).

    Returns:
        The C header: per encoded field ``FH_<MESSAGE>_<FIELD>`` (its number) and
        ``FH_<MESSAGE>_<FIELD>_TAG`` (its tag byte); per enum value the C code
        acts on, ``FH_<ENUM>_<VALUE>`` (``FH_ENTRYTYPE_TRADE``).

    Raises:
        SchemaError: a field is missing or differs from what adapter/formats/feedha_fix/_fastpath.c
            assumes (the message names it).
    """
    lines = [
        "/*",
        f" * Generated by scripts/gen_proto.py from {MARKET_PROTO}: do not edit.",
        " *",
        " * The field numbers and tags (field number << 3 | wire type) of what",
        f" * {ENCODER} encodes. The generator refuses to write this file",
        " * when the schema no longer matches the encoder's assumptions.",
        " */",
        "#ifndef FEEDHA_MARKET_FIELDS_H",
        "#define FEEDHA_MARKET_FIELDS_H",
    ]
    for full_name in _ENCODED:
        lines += ["", *_message_lines(_find_message(file, full_name))]
    for full_name, names in _ENUMS.items():
        (enum_name,) = _relative_name(file, full_name)
        enum = file.enum_types_by_name.get(enum_name)
        lines += ["", f"/* {full_name} */"]
        for name in names:
            value = enum.values_by_name.get(name) if enum is not None else None
            if value is None:
                raise SchemaError(f"{full_name}.{name} is missing: {ENCODER} uses it")
            lines.append(f"#define {_enum_macro(full_name, name)} {value.number}")
    lines += ["", "#endif /* FEEDHA_MARKET_FIELDS_H */", ""]
    return "\n".join(lines)


def generate(out_root: Path, source_root: Path = ROOT) -> list[str]:
    """Generate every file from ``source_root/proto/*.proto`` under ``out_root``.

    Args:
        out_root: where to write, in the repository's layout (``proto/``, ``adapter/``).
        source_root: a directory holding ``proto/*.proto`` (the repository's by default).

    Returns:
        The generated files' paths relative to ``out_root``.

    Raises:
        SchemaError: market.proto no longer matches the C encoder.
    """
    (out_root / "proto").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        _compile(
            source_root,
            Path(tmp),
            [f"--python_out={tmp}", f"--pyi_out={tmp}", f"--grpc_python_out={tmp}"],
        )
        for path in (Path(tmp) / PACKAGE_DIR).iterdir():
            shutil.move(path, out_root / "proto" / path.name)
    kept = []
    for path in sorted((out_root / "proto").iterdir()):
        if not path.name.endswith(PROTO_SUFFIXES):
            continue
        # grpc_tools writes a *_pb2_grpc.py for every file; drop the empty ones
        # (files without a service) so the tree holds only code that does something.
        if path.name.endswith("_pb2_grpc.py") and "Servicer" not in path.read_text():
            path.unlink()
            continue
        kept.append(f"proto/{path.name}")
    header = out_root / HEADER
    header.parent.mkdir(parents=True, exist_ok=True)
    header.write_text(market_fields_header(load_market(source_root)))
    return [*kept, HEADER]


def checked_in(root: Path = ROOT) -> set[str]:
    """The generated files present under ``root``, relative to it."""
    names = {f"proto/{p.name}" for p in (root / "proto").iterdir() if p.name.endswith(PROTO_SUFFIXES)}
    return names | ({HEADER} if (root / HEADER).exists() else set())


def stale_files(fresh_root: Path, fresh: list[str], root: Path = ROOT) -> list[str]:
    """The generated files under ``root`` that differ from ``fresh`` (files under ``fresh_root``)."""
    current = checked_in(root)
    return sorted(
        name
        for name in current | set(fresh)
        if name not in fresh
        or name not in current
        or not filecmp.cmp(fresh_root / name, root / name, shallow=False)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--check", action="store_true", help="fail if generated code is stale; change nothing"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            fresh = generate(Path(tmp))
        except SchemaError as exc:
            print(f"{MARKET_PROTO} does not match {ENCODER}: {exc}", file=sys.stderr)
            return 1
        if args.check:
            stale = stale_files(Path(tmp), fresh)
            if stale:
                print("generated code is stale, run: python scripts/gen_proto.py", file=sys.stderr)
                for name in stale:
                    print(f"  {name}", file=sys.stderr)
                return 1
            return 0
        for name in checked_in() - set(fresh):
            (ROOT / name).unlink()
        for name in fresh:
            shutil.copyfile(Path(tmp) / name, ROOT / name)
        print(f"generated {len(fresh)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
