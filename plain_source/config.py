"""The plain source's settings: one frozen dataclass, checked when built.

Pure (no I/O): :mod:`plain_source.cli` builds it from argv, and
:class:`~plain_source.source.PlainSource` takes it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from feedha.plain_source.model import split_symbols
from feedha.transport.backpressure import DEFAULT_MAX_STALL_S
from feedha.transport.locality import is_local_endpoint

DEFAULT_STREAMS: Final = ("A-M", "N-Z")
DEFAULT_SYMBOLS: Final = 100
DEFAULT_RATE: Final = 1000.0
MAX_BATCH: Final = 64
PREGENERATE_MAX: Final = 3_000_000  # messages (~190 bytes each): bounded memory for --pregenerate
# How long the source's close() keeps flushing to subscribers that lag: an adapter
# of a group run at its limit on 2 cores can be 1-2 s behind when the source ends,
# and 2 s lost the tail of the stream for it (measured: the 50k msg/s failover drill
# lost the last 859-34,388 messages in 3 runs of 25).
DEFAULT_LINGER_MS: Final = 15_000
DEFAULT_WAIT_TIMEOUT_S: Final = 10.0
# Frames queued per subscriber before a send waits for it (XPUB_NODROP: the source slows to its
# slowest subscriber instead of dropping; feedha.transport.backpressure).
DEFAULT_SNDHWM: Final = 64  # small: libzmq resumes a full queue once half of it went out


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceConfig:
    """Settings of one plain source.

    Attributes:
        streams: stream names (letter ranges), numbered 1..n in this order.
        endpoints: ``(stream, endpoint)`` to bind; streams without one bind a random port on ``bind_host``.
        bind_host: host for random ports.
        symbols: how many symbols.
        seed: random seed; with ``epoch_ns`` it fixes the byte stream.
        epoch_ns: event time of the first message; ``None`` means now.
        rate: messages per second over all streams; 0 means as fast as possible.
        seconds: stop after this long (``None``: no limit).
        count: stop after this many valid messages (``None``: no limit).
        batch: FIX messages per frame at most; ``None`` means MAX_BATCH. A message is
            sent as soon as it is due: frames carry several only when several are
            due at once (under load, or unpaced).
        malformed_every: inject one malformed item every this many messages (0: never).
        poison_every: replace every this many messages by poison (a message with its
            source_seq that no adapter can publish: oversize, not UTF-8, a bad number, an
            overflow; every fifth also a source_seq jump), 0: never.
        wait_subscribers: before sending, wait for this many subscriptions on every stream.
        wait_timeout_s: how long to wait for them.
        sndhwm: ZMQ_SNDHWM, frames queued per subscriber; past it a send waits for that subscriber
            (back-pressure: the source slows down and reports its achieved rate, it never drops).
        max_stall_s: the longest a send waits for a subscriber that reads nothing; then it goes out
            past that subscriber, which misses a stretch of the stream (a gap its adapter counts
            and its group repairs) while everybody else goes on.
        linger_ms: ZMQ_LINGER: how long close() may spend flushing.
        start_seq: first source_seq of every stream.
        pregenerate: generate every message of the run before the clock starts
            and only pace the sends (needs ``count``, or ``rate`` and ``seconds``;
            at most PREGENERATE_MAX messages). For capacity benchmarks on small
            machines, where a live generator (~5 µs of Python per message)
            would take the CPU of the system under test. Event times then
            follow the schedule from when generation began, not the sends,
            unless ``due_stamps``.
        due_stamps: with ``pregenerate`` and a ``rate``: stamp each message with the time it
            is due, as a live run does (latency runs). The run is made for an epoch far
            enough ahead to finish making it, and the clock starts at that epoch.
        curve_key: the source's CURVE key pair (secret file): the streams are CURVE servers, so an
            adapter that verifies this key (``--source-key``) reads only this source, and nobody
            can inject ticks on the way.
        allowed_keys: files of the public keys that may subscribe (the adapters' ``.pub``); with
            ``curve_key``, nobody else is admitted.
        insecure: bind without keys off loopback (refused otherwise), or with one of
            ``curve_key``/``allowed_keys`` only.
    """

    streams: tuple[str, ...] = DEFAULT_STREAMS
    endpoints: tuple[tuple[str, str], ...] = ()
    bind_host: str = "127.0.0.1"
    symbols: int = DEFAULT_SYMBOLS
    seed: int = 1
    epoch_ns: int | None = None
    rate: float = DEFAULT_RATE
    seconds: float | None = None
    count: int | None = None
    batch: int | None = None
    malformed_every: int = 0
    poison_every: int = 0
    wait_subscribers: int = 0
    wait_timeout_s: float = DEFAULT_WAIT_TIMEOUT_S
    sndhwm: int = DEFAULT_SNDHWM
    max_stall_s: float = DEFAULT_MAX_STALL_S
    linger_ms: int = DEFAULT_LINGER_MS
    start_seq: int = 1
    pregenerate: bool = False
    due_stamps: bool = False
    curve_key: Path | None = None
    allowed_keys: tuple[Path, ...] = ()
    insecure: bool = False

    @property
    def planned_count(self) -> int | None:
        """How many messages the run sends at most, if it is bounded."""
        by_time = None if self.seconds is None or self.rate <= 0 else math.ceil(self.rate * self.seconds)
        if self.count is None:
            return by_time
        return self.count if by_time is None else min(self.count, by_time)

    def __post_init__(self) -> None:
        if not self.streams or len(set(self.streams)) != len(self.streams):
            raise ValueError(f"streams must be distinct and non-empty: {self.streams!r}")
        split_symbols([], self.streams)  # checks names and overlaps
        unknown = {name for name, _e in self.endpoints} - set(self.streams)
        if unknown:
            raise ValueError(
                f"endpoint for unknown stream(s) {sorted(unknown)}; streams are {list(self.streams)}"
            )
        checks = {
            "symbols": self.symbols >= 1,
            "rate": self.rate >= 0,
            "seconds": self.seconds is None or self.seconds >= 0,
            "count": self.count is None or self.count >= 0,
            "batch": self.batch is None or self.batch >= 1,
            "malformed_every": self.malformed_every >= 0,
            "poison_every": self.poison_every >= 0,
            "wait_subscribers": self.wait_subscribers >= 0,
            "sndhwm": self.sndhwm >= 1,
            "max_stall_s": self.max_stall_s > 0,
            "linger_ms": self.linger_ms >= -1,
            "start_seq": self.start_seq >= 1,
        }
        for name, ok in checks.items():
            if not ok:
                raise ValueError(f"bad {name}: {getattr(self, name)!r}")
        if not self.insecure:
            self._check_secure()
        if self.pregenerate:
            planned = self.planned_count
            if planned is None:
                raise ValueError(
                    "pregenerate needs --count, or --rate and --seconds, to know how much to generate"
                )
            if planned > PREGENERATE_MAX:
                raise ValueError(f"pregenerate: {planned} messages exceed the limit of {PREGENERATE_MAX}")
            if self.malformed_every or self.poison_every:
                raise ValueError(
                    "pregenerate does not inject malformed messages (drop --malformed-every/--poison-every)"
                )
        if self.due_stamps and (not self.pregenerate or self.rate <= 0 or self.epoch_ns is not None):
            raise ValueError(
                "due stamps are for a paced pregenerated run (--pregenerate and --rate, no --epoch-ns; "
                "a live run stamps due times anyway)"
            )

    def _check_secure(self) -> None:
        # Secure unless told otherwise: all keys or none, and none only on loopback.
        if (self.curve_key is None) != (not self.allowed_keys):
            raise ValueError(
                "partial key setup: give --curve-key (the source's key pair) and --allow-key (the adapters' "
                "public keys) together, or --insecure"
            )
        if self.curve_key is not None:
            return
        endpoints = [endpoint for _name, endpoint in self.endpoints]
        if len(self.endpoints) < len(self.streams):
            endpoints.append(f"tcp://{self.bind_host}:0")
        exposed = [endpoint for endpoint in endpoints if not is_local_endpoint(endpoint)]
        if exposed:
            raise ValueError(
                f"refusing to publish the source without keys off loopback ({', '.join(exposed)}): anyone "
                "reaching it could read it, and a fake source could feed the adapters. Give --curve-key and "
                "--allow-key, or --insecure"
            )
