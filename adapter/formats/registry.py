"""The input formats, one line each: what ``--format`` offers and what an adapter runs.

Adding a format is its folder (``adapter/formats/<name>/``, CONTRIBUTING.md lists
its files) and one line in :data:`FORMATS`. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Final

from feedha.adapter.conversion.budget import DEFAULT_TABLE_BYTES
from feedha.adapter.conversion.engine import ConversionEngine
from feedha.adapter.formats.feedha_fix.format import FORMAT as FEEDHA_FIX
from feedha.adapter.formats.fix44.format import FORMAT as FIX44
from feedha.adapter.formats.interface import DEFAULT_BOOK_DEPTH, MAX_ORDERS, OPTIONS, EngineOptions, Format
from feedha.adapter.formats.itch50.format import FORMAT as ITCH50

__all__ = [
    "DEFAULT_FORMAT",
    "FORMATS",
    "engine_for_format",
    "format_named",
    "option_problems",
]

FORMATS: Final[Mapping[str, Format]] = MappingProxyType(
    {
        FEEDHA_FIX.name: FEEDHA_FIX,
        FIX44.name: FIX44,
        ITCH50.name: ITCH50,
    }
)
DEFAULT_FORMAT: Final = FEEDHA_FIX.name


def format_named(name: str) -> Format:
    """The format called ``name``.

    Raises:
        ValueError: no format is called that (the message lists those there are).
    """
    found = FORMATS.get(name)
    if found is None:
        raise ValueError(f"unknown input format {name!r}; one of {sorted(FORMATS)}")
    return found


def option_problems(name: str, given: Iterable[str]) -> list[str]:
    """What is wrong with giving the options ``given`` (of :data:`OPTIONS`) to the format ``name``.

    Returns:
        One sentence per option the format does not read, naming the formats that do.
    """
    fmt = format_named(name)
    problems = []
    for option in given:
        if option in OPTIONS and option not in fmt.options:
            readers = ", ".join(sorted(each.name for each in FORMATS.values() if option in each.options))
            problems.append(f"{option} applies to input_format {readers} only")
    return problems


def engine_for_format(
    input_format: str,
    converter_table: Path | None = None,
    *,
    book_depth: int = DEFAULT_BOOK_DEPTH,
    securities: Path | None = None,
    max_orders: int = MAX_ORDERS,
    table_budget: int = DEFAULT_TABLE_BYTES,
) -> ConversionEngine:
    """The conversion engine of one input format, its state's tables held to ``table_budget``.

    Args:
        input_format: one of :data:`FORMATS`.
        converter_table, book_depth, securities, max_orders, table_budget: the
            :class:`~adapter.formats.interface.EngineOptions` (each format reads its own).

    Raises:
        ValueError: an unknown format.
        ConfigError: a table of the format's own that cannot be read.
    """
    options = EngineOptions(
        converter_table=converter_table,
        book_depth=book_depth,
        securities=securities,
        max_orders=max_orders,
        table_budget=table_budget,
    )
    engine = format_named(input_format).make_engine(options)
    engine.state.table_budget = table_budget
    return engine
