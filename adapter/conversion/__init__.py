"""Conversion: what every input format's conversion is made of (each format's own is its folder).

``engine`` (what an engine is; ``_reference.LoopEngine``, the run in Python),
``messages`` (:class:`SourceMessage`), ``state`` (per-symbol values and their
digest), ``codec`` (``MarketUpdate`` bytes), ``book``, ``order_table`` and
``choice`` (the books and the order store), ``budget`` (the tables' bytes) and
the C they share (``_orders.c`` and the headers). A format's parser, engine and
table live in ``adapter/formats/<name>/``. All pure.
"""

from __future__ import annotations

from feedha.adapter.conversion.codec import encode_update, from_proto, to_proto
from feedha.adapter.conversion.engine import ConversionEngine, Run, Stop
from feedha.adapter.conversion.messages import SourceMessage, SourceUpdateEntry
from feedha.adapter.conversion.source_seq import peek_source_seq
from feedha.adapter.conversion.state import ConversionState, SymbolValues

__all__ = [
    "ConversionEngine",
    "ConversionState",
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
