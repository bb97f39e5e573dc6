"""The message models a channel's blocks can carry: name, version and self-description.

The admin server hands every route out with the name of the model its blocks
carry (``feedha.v1.MarketUpdate``), that model's version and a serialized
``google.protobuf.FileDescriptorSet`` describing it, so a subscriber written in
another language (or a tool that has none of feedha's code) can build the
decoder at run time (docs/wire-format.md, "Message models").

A version is ``MAJOR.MINOR``. The minor number grows when fields or messages
are added (an older decoder skips what it does not know); the major number
grows only when a change would make an older decoder misread a block, and a
client refuses a major number it does not know. Pure.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Final

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FileDescriptor

from feedha.proto import market_pb2
from feedha.proto.errors import ProtoError

__all__ = ["MARKET_MODEL", "MODELS", "SESSION_VALUES", "Model", "major_of", "model_named"]

# market.proto's ``SessionValues`` fields that may be unset (``optional``), in field-number
# order (1..9): a book's session statistics, as every converter and the client name them.
SESSION_VALUES: Final = ("volume", "last", "high", "low", "open", "close", "settle", "open_interest", "vwap")


@dataclass(frozen=True, slots=True)
class Model:
    """A message model: the full protobuf name of a block's message and its version.

    Attributes:
        name: the message's full name, e.g. ``feedha.v1.MarketUpdate``.
        version: ``MAJOR.MINOR``.
        history: what each version added, oldest first (for people).
    """

    name: str
    version: str
    history: tuple[str, ...]

    @property
    def major(self) -> int:
        """The major number of :attr:`version`."""
        return major_of(self.version)

    def descriptor_set(self) -> bytes:
        """A serialized ``FileDescriptorSet`` holding the model's file and every file it imports."""
        return _descriptor_set(self.name)


MARKET_MODEL: Final = Model(
    name="feedha.v1.MarketUpdate",
    version="1.4",
    history=(
        "1.0: one symbol's trades, quotes and state; extra fields; session boundaries; tombstones; images",
        "1.1: fix44 order books (Book, BookChange, SessionValues, SymbolUpdate; MarketUpdate.symbols)",
        "1.2: itch50 live orders in images (Book.orders); a purged fix44 block's symbols (Tombstone.symbols)",
        "1.3: the itch50 orders a block touched (SymbolUpdate.orders)",
        "1.4: fix44 blocks show the best depth levels, and the prices set (SymbolUpdate.levels)",
    ),
)
MODELS: Final = {MARKET_MODEL.name: MARKET_MODEL}


def model_named(name: str) -> Model:
    """The model called ``name``.

    Raises:
        ProtoError: no such model (the names are those of :data:`MODELS`).
    """
    try:
        return MODELS[name]
    except KeyError:
        raise ProtoError("model", f"unknown message model {name!r}; known: {sorted(MODELS)}") from None


def major_of(version: str) -> int:
    """The major number of a ``MAJOR.MINOR`` version.

    Raises:
        ProtoError: not two dot-separated decimal numbers.
    """
    major, dot, minor = version.partition(".")
    if not (dot and major.isdigit() and minor.isdigit() and len(version) <= 16):
        raise ProtoError("version", f"model version {version[:32]!r} is not MAJOR.MINOR")
    return int(major)


@functools.cache
def _descriptor_set(name: str) -> bytes:
    message = market_pb2.DESCRIPTOR.pool.FindMessageTypeByName(name)
    files: list[descriptor_pb2.FileDescriptorProto] = []
    seen: set[str] = set()

    def add(file_descriptor: FileDescriptor) -> None:  # dependencies first, as a pool adds them
        if file_descriptor.name in seen:
            return
        seen.add(file_descriptor.name)
        for dependency in file_descriptor.dependencies:
            add(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        file_descriptor.CopyToProto(proto)
        files.append(proto)

    add(message.file)
    return descriptor_pb2.FileDescriptorSet(file=files).SerializeToString(deterministic=True)
