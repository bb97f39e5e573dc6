"""What an input format is: its name, its engine and the options it reads (docs/converters.md).

A :class:`Format` is a value, written once in its folder (``adapter/formats/<name>/format.py``)
and listed on one line of :mod:`adapter.formats.registry`. The core, recovery,
snapshots, purges and the client never ask for a format by name: they run the
engine a format made (:class:`~adapter.conversion.engine.ConversionEngine`: its
framing, parser, run and conversion state) and read the blocks it writes
through :mod:`proto.blocks` (one reader of every block shape). Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from feedha.adapter.conversion.budget import DEFAULT_TABLE_BYTES

if TYPE_CHECKING:
    from feedha.adapter.conversion.engine import ConversionEngine

__all__ = ["DEFAULT_BOOK_DEPTH", "MAX_BOOK_DEPTH", "MAX_ORDERS", "OPTIONS", "EngineOptions", "Format"]

DEFAULT_BOOK_DEPTH: Final = 10
MAX_BOOK_DEPTH: Final = 1000
MAX_ORDERS: Final = 20_000_000  # live orders held by default, if the memory budget holds them
# The options only some formats read (a format's Format.options names those it reads); an
# adapter configured with one its format does not read is refused.
OPTIONS: Final = ("converter_table", "securities", "book_depth", "max_orders")


@dataclass(frozen=True, kw_only=True, slots=True)
class EngineOptions:
    """What an adapter's configuration tells the engine of its format.

    Attributes:
        converter_table: a converter table's YAML (``None``: the packaged one).
        book_depth: the book levels a side shown in a block.
        securities: a security table's YAML (SecurityID -> symbol), or ``None``.
        max_orders: the most live orders held (an add past it is quarantined, ``order_limit``).
        table_budget: the bytes the state's tables may count (past it: ``memory_limit``;
            :mod:`adapter.conversion.budget`).
    """

    converter_table: Path | None = None
    book_depth: int = DEFAULT_BOOK_DEPTH
    securities: Path | None = None
    max_orders: int = MAX_ORDERS
    table_budget: int = DEFAULT_TABLE_BYTES


@dataclass(frozen=True, kw_only=True, slots=True)
class Format:
    """One input format.

    Attributes:
        name: what ``--format`` and ``input_format`` call it.
        summary: one line for ``--help`` and the docs.
        make_engine: the format's conversion engine for an adapter's options (raises
            ``ConfigError`` on an unreadable table of the format's own).
        options: which of :data:`OPTIONS` it reads.
    """

    name: str
    summary: str
    make_engine: Callable[[EngineOptions], ConversionEngine]
    options: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = self.options - set(OPTIONS)
        if unknown:
            raise ValueError(f"format {self.name}: unknown options {sorted(unknown)}")
