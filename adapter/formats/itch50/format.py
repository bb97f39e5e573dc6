"""The ``itch50`` format: TotalView-ITCH 5.0 in MoldUDP64 packets into market-by-order books."""

from __future__ import annotations

from typing import Final

from feedha.adapter.conversion.engine import ConversionEngine
from feedha.adapter.formats.interface import EngineOptions, Format

__all__ = ["FORMAT"]


def _engine(options: EngineOptions) -> ConversionEngine:
    from feedha.adapter.formats.itch50.engine import Itch50Engine

    engine = Itch50Engine(depth=options.book_depth, max_orders=options.max_orders)
    return engine


FORMAT: Final = Format(
    name="itch50",
    summary="NASDAQ TotalView-ITCH 5.0 in MoldUDP64 packets into market-by-order books",
    make_engine=_engine,
    options=frozenset({"book_depth", "max_orders"}),
)
