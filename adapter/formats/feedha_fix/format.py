"""The ``feedha-fix`` format: the converter table's engine, native where the C fast path takes the table."""

from __future__ import annotations

from typing import Final

from feedha.adapter.conversion.engine import ConversionEngine
from feedha.adapter.formats.feedha_fix.choice import make_engine
from feedha.adapter.formats.feedha_fix.table import ConverterTable
from feedha.adapter.formats.interface import EngineOptions, Format

__all__ = ["FORMAT"]


def _engine(options: EngineOptions) -> ConversionEngine:
    engine = make_engine(ConverterTable.load(options.converter_table))
    return engine


FORMAT: Final = Format(
    name="feedha-fix",
    summary="feedha's own FIX dialect, converted by the YAML converter table",
    make_engine=_engine,
    options=frozenset({"converter_table"}),
)
