"""Input formats: which converter an adapter runs for its source stream (docs/converters.md).

``feedha-fix`` is feedha's own dialect, converted by the YAML converter table
(the C fast path where built); ``fix44`` is FIX 4.4 / FIX 5.0 SP2 market
data, converted into order books by :mod:`adapter.conversion.fix44_engine`;
``itch50`` is NASDAQ TotalView-ITCH 5.0 in MoldUDP64 packets, converted into
market-by-order books by :mod:`adapter.conversion.itch50_engine`.
Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

import yaml

from feedha.adapter.conversion.budget import DEFAULT_TABLE_BYTES
from feedha.adapter.conversion.choice import make_engine
from feedha.adapter.conversion.engine import ConversionEngine
from feedha.adapter.conversion.itch50_state import MAX_ORDERS
from feedha.adapter.conversion.table import ConverterTable
from feedha.adapter.errors import ConfigError

__all__ = [
    "DEFAULT_FORMAT",
    "INPUT_FORMATS",
    "MAX_BOOK_DEPTH",
    "MAX_ORDERS",
    "engine_for_format",
    "load_securities",
]

DEFAULT_FORMAT: Final = "feedha-fix"
INPUT_FORMATS: Final = frozenset({"feedha-fix", "fix44", "itch50"})
MAX_BOOK_DEPTH: Final = 1000


MAX_SECURITIES: Final = 1_000_000


def load_securities(path: Path) -> dict[str, str]:
    """Read a ``fix44`` security table: YAML, ``SecurityID`` (or ``SecurityIDSource:SecurityID``) -> symbol.

    Raises:
        ConfigError: unreadable, not a mapping of non-empty strings, or too large.
    """
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"security table {path}: {exc}") from exc
    if not isinstance(raw, dict) or len(raw) > MAX_SECURITIES:
        raise ConfigError(f"security table {path}: must be a mapping of at most {MAX_SECURITIES} entries")
    table = {str(key): str(value) for key, value in raw.items()}
    empty = [key for key, value in table.items() if not key or not value]
    if empty:
        raise ConfigError(f"security table {path}: empty id or symbol at {empty[:3]}")
    return table


def engine_for_format(
    input_format: str,
    converter_table: Path | None = None,
    *,
    book_depth: int = 10,
    securities: Mapping[str, str] | None = None,
    max_orders: int = MAX_ORDERS,
    table_budget: int = DEFAULT_TABLE_BYTES,
) -> ConversionEngine:
    """The conversion engine of one input format.

    Args:
        input_format: one of :data:`INPUT_FORMATS`.
        converter_table: ``feedha-fix``'s table (``None``: the packaged one).
        book_depth: the book depth of ``fix44`` and ``itch50``.
        securities: ``fix44``'s SecurityID -> symbol table.
        max_orders: ``itch50``'s most live orders (an add past it is quarantined, ``order_limit``).
        table_budget: the bytes the state's tables may count (past it: ``memory_limit``;
            :mod:`adapter.conversion.budget`).

    Raises:
        ValueError: an unknown format.
    """
    engine: ConversionEngine
    if input_format == "feedha-fix":
        engine = make_engine(ConverterTable.load(converter_table))
    elif input_format == "fix44":
        from feedha.adapter.conversion.fix44_engine import Fix44Engine

        engine = Fix44Engine(depth=book_depth, securities=securities)
    elif input_format == "itch50":
        from feedha.adapter.conversion.itch50_engine import Itch50Engine

        engine = Itch50Engine(depth=book_depth, max_orders=max_orders)
    else:
        raise ValueError(f"unknown input format {input_format!r}; one of {sorted(INPUT_FORMATS)}")
    engine.state.table_budget = table_budget
    return engine
