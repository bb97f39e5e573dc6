"""The plain-Python test source: deterministic FIX-style source streams on ZeroMQ XPUB sockets.

A stand-in for the Spark feed source (no pyspark) for tests, drills, demos
and benchmarks. Symbols are split among source streams by first letter; a
seeded model emits quotes, trades and bursts, each stream numbering its
messages with a gap-free ``source_seq``; the same seed and ``epoch_ns`` give
byte-identical streams.

Quick start::

    from feedha.plain_source import PlainSource, SourceConfig

    source = PlainSource(SourceConfig(count=1000))
    endpoints = source.bind()          # {"A-M": "tcp://127.0.0.1:PORT", ...}
    summary = source.run(stop_event)   # blocks; closes the sockets

Layout: :mod:`~plain_source.model` (symbols and messages),
:mod:`~plain_source.frames` (frames, malformed injection) and
:mod:`~plain_source.pacing` (due counts) are pure, as is
:mod:`~plain_source.config`; :mod:`~plain_source.source` is the socket shell
and :mod:`~plain_source.cli` the ``feedha source`` command
(``python -m feedha.plain_source``).
"""

from __future__ import annotations

from feedha.plain_source.config import (
    DEFAULT_LINGER_MS,
    DEFAULT_RATE,
    DEFAULT_STREAMS,
    DEFAULT_SYMBOLS,
    DEFAULT_WAIT_TIMEOUT_S,
    MAX_BATCH,
    PREGENERATE_MAX,
    SourceConfig,
)
from feedha.plain_source.frames import corrupt, garbage, plan_frames
from feedha.plain_source.model import (
    SENDER,
    GeneratedMessage,
    SymbolModel,
    parse_stream_range,
    split_symbols,
    symbol_names,
)
from feedha.plain_source.pacing import MAX_CATCHUP_S, PacingSchedule, PublishDelays
from feedha.plain_source.source import PlainSource
from feedha.plain_source.summary import SourceSummary

__all__ = [
    "DEFAULT_LINGER_MS",
    "DEFAULT_RATE",
    "DEFAULT_STREAMS",
    "DEFAULT_SYMBOLS",
    "DEFAULT_WAIT_TIMEOUT_S",
    "MAX_BATCH",
    "MAX_CATCHUP_S",
    "PREGENERATE_MAX",
    "SENDER",
    "GeneratedMessage",
    "PacingSchedule",
    "PlainSource",
    "PublishDelays",
    "SourceConfig",
    "SourceSummary",
    "SymbolModel",
    "corrupt",
    "garbage",
    "parse_stream_range",
    "plan_frames",
    "split_symbols",
    "symbol_names",
]
