"""Conversion: source messages into the application message model, and the conversion state.

``table`` (the converter table), ``parser`` (FIX body -> :class:`SourceMessage`),
``state`` (per-symbol values and their digest), ``codec`` (``MarketUpdate``
bytes), and the engines that run them (``engine``, chosen by ``choice``). All pure.
"""

from __future__ import annotations

from feedha.adapter.conversion.codec import encode_update, from_proto, to_proto
from feedha.adapter.conversion.engine import ConversionEngine, Run, Stop
from feedha.adapter.conversion.messages import SourceMessage, SourceUpdateEntry
from feedha.adapter.conversion.parser import REASONS, Converter, peek_source_seq
from feedha.adapter.conversion.state import ConversionState, SymbolValues
from feedha.adapter.conversion.table import ConverterTable

__all__ = [
    "REASONS",
    "ConversionEngine",
    "ConversionState",
    "Converter",
    "ConverterTable",
    "Run",
    "SourceMessage",
    "SourceUpdateEntry",
    "Stop",
    "SymbolValues",
    "encode_update",
    "from_proto",
    "peek_source_seq",
    "to_proto",
]
