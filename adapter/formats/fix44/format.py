"""The ``fix44`` format: FIX market data into order books, with an optional security table."""

from __future__ import annotations

from typing import Final

from feedha.adapter.conversion.engine import ConversionEngine
from feedha.adapter.formats.fix44.securities import load_securities
from feedha.adapter.formats.interface import EngineOptions, Format

__all__ = ["FORMAT"]


def _engine(options: EngineOptions) -> ConversionEngine:
    from feedha.adapter.formats.fix44.engine import Fix44Engine

    securities = None if options.securities is None else load_securities(options.securities)
    engine = Fix44Engine(depth=options.book_depth, securities=securities)
    return engine


FORMAT: Final = Format(
    name="fix44",
    summary="FIX 4.4 / FIX 5.0 SP2 market data into order books",
    make_engine=_engine,
    options=frozenset({"securities", "book_depth"}),
)
