"""The ``feedha source`` command (also ``python -m feedha.plain_source``).

Prints the bound endpoints as a JSON line, sends, then prints the summary
line; exits 0, 1 if waiting for subscribers timed out, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, Final

import zmq

from feedha import logs, settings
from feedha.adapter.formats.capture_registry import CAPTURES, capture_named, default_capture
from feedha.plain_source.config import (
    DEFAULT_LINGER_MS,
    DEFAULT_RATE,
    DEFAULT_SNDHWM,
    DEFAULT_STREAMS,
    DEFAULT_SYMBOLS,
    DEFAULT_WAIT_TIMEOUT_S,
    MAX_BATCH,
    SourceConfig,
)
from feedha.plain_source.playback import CapturePlayback
from feedha.plain_source.source import PlainSource
from feedha.runtime import settle_heap
from feedha.transport.backpressure import DEFAULT_MAX_STALL_S

_DESCRIPTION: Final = (
    "The plain-Python test source: deterministic FIX-style source streams on ZeroMQ XPUB sockets."
)


def _endpoint(text: str) -> tuple[str, str]:
    name, sep, endpoint = text.partition("=")
    if not sep or not name or not endpoint:
        raise argparse.ArgumentTypeError(f"expected NAME=ENDPOINT, got {text!r}")
    return name, endpoint


def _burst(text: str) -> tuple[float, float]:
    rate, sep, seconds = text.partition(":")
    try:
        burst = (float(rate), float(seconds))
    except ValueError:
        burst = (0.0, 0.0)
    if not sep or not (burst[0] > 0 and burst[1] > 0):
        raise argparse.ArgumentTypeError(f"expected RATE:SECONDS, both positive, got {text!r}")
    return burst


def build_parser() -> argparse.ArgumentParser:
    """The ``feedha source`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="feedha source",
        description=_DESCRIPTION + " Every option is also a key of the --config file and a "
        "FEEDHA_<OPTION> variable.",
    )
    add = parser.add_argument
    _market_arguments(add)
    _rate_arguments(add)
    _fault_arguments(add)
    _subscriber_arguments(add)
    _run_arguments(add)
    _security_arguments(add)
    _capture_arguments(parser)
    settings.add_common_arguments(parser, log_level="WARNING")
    return parser


def _capture_arguments(parser: argparse.ArgumentParser) -> None:
    # A capture played back instead of a generated market.
    capture = parser.add_argument_group("captured feeds (docs/converters.md)")
    capture.add_argument(
        "--file",
        help="play this capture back on the first stream (raw FIX back to back, or one message a line "
        "with an optional 'TIMESTAMP : ' prefix; itch50: BinaryFILE, sent as MoldUDP64 packets) instead "
        "of generating a market",
    )
    capture.add_argument(
        "--format",
        choices=sorted(CAPTURES),
        default=default_capture("source"),
        help="the capture's input format (the adapters' --format; default: %(default)s)",
    )
    pace = capture.add_mutually_exclusive_group()
    pace.add_argument(
        "--speed", type=float, help="pace by the messages' 52/60 times, X times as fast (replaces --rate)"
    )
    pace.add_argument("--as-fast-as-possible", action="store_true", help="send the capture unpaced")
    capture.add_argument(
        "--burst",
        type=_burst,
        metavar="RATE:SECONDS",
        help="play the first SECONDS at RATE messages/s, then at --rate (feedha drill overload)",
    )
    capture.add_argument(
        "--progress",
        action="store_true",
        help='print {"event": "progress", "t", "due", "out"} twice a second: messages due by the '
        "schedule and messages sent (how far subscribers hold the playback back)",
    )


def _market_arguments(add: Callable[..., Any]) -> None:
    # The market: where its streams go, which symbols, its seed and epoch.
    add("--endpoint", type=_endpoint, action="append", default=[], metavar="NAME=tcp://HOST:PORT")
    add("--bind-host", default="127.0.0.1", help="host for random ports (streams without --endpoint)")
    add("--streams", help="comma-separated letter ranges (default A-M,N-Z, or the --endpoint names)")
    add("--symbols", type=int, default=DEFAULT_SYMBOLS)
    add("--seed", type=int, default=1)
    add("--epoch-ns", type=int, default=None, help="event time of the first message (default: now)")


def _rate_arguments(add: Callable[..., Any]) -> None:
    # How fast and how much: the rate, the run's length, messages a frame.
    add("--rate", type=float, default=DEFAULT_RATE, help="messages/s over all streams; 0 = unpaced")
    add("--seconds", type=float, default=None)
    add("--count", type=int, default=None)
    add(
        "--batch",
        type=int,
        default=None,
        help=f"most FIX messages per frame (default {MAX_BATCH}); every message goes out as soon as it is "
        "due, so frames carry several only when several are due at once",
    )


def _fault_arguments(add: Callable[..., Any]) -> None:
    # Faults on purpose: garbage and poison the adapters must survive.
    add("--malformed-every", type=int, default=0, metavar="K", help="inject garbage every K messages")
    add(
        "--poison-every",
        type=int,
        default=0,
        metavar="K",
        help="replace every K-th message by poison no adapter can publish (oversize, bad UTF-8, bad number, "
        "volume overflow, a source_seq jump): adapters must quarantine it and lose nothing else",
    )


def _subscriber_arguments(add: Callable[..., Any]) -> None:
    # The subscribers: waiting for them, and what a slow one costs.
    add("--wait-subscribers", type=int, default=0, metavar="N")
    add("--wait-timeout", type=float, default=DEFAULT_WAIT_TIMEOUT_S)
    add(
        "--sndhwm",
        type=int,
        default=DEFAULT_SNDHWM,
        help="frames queued per subscriber (default %(default)s); past it a send waits for that "
        "subscriber: the source slows to its slowest subscriber and reports the rate it achieved "
        "(achieved_rate, backpressure in the summary) instead of dropping",
    )
    add(
        "--max-stall",
        type=float,
        default=DEFAULT_MAX_STALL_S,
        metavar="SECONDS",
        help="the longest a send waits for a subscriber that reads nothing (stopped, hung); then it goes "
        "out past it and that subscriber misses a stretch, a gap its adapter counts and its group "
        "repairs (default: %(default)s)",
    )
    add(
        "--linger-ms",
        type=int,
        default=DEFAULT_LINGER_MS,
        help="how long closing flushes to lagging subscribers",
    )


def _run_arguments(add: Callable[..., Any]) -> None:
    # Numbering, and a run generated before the clock starts.
    add("--start-seq", type=int, default=1)
    add(
        "--pregenerate",
        action="store_true",
        help="generate the whole run before the clock starts, then only pace the sends "
        "(capacity benchmarks; needs --count or --rate and --seconds)",
    )
    add(
        "--due-stamps",
        action="store_true",
        help="with --pregenerate and --rate: stamp each message with the time it is due, as a live "
        "run does (latency runs); the clock starts once the run is made, at the epoch it was made for",
    )


def _security_arguments(add: Callable[..., Any]) -> None:
    # CURVE: who the source is and who may subscribe.
    add(
        "--curve-key",
        type=Path,
        help="the source's CURVE key pair (`feedha keys new FILE`): the streams are CURVE servers, "
        "adapters verify the source with FILE.pub (--source-key) and nobody can inject ticks on the way",
    )
    add(
        "--allow-key",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="public keys that may subscribe, one Z85 key per line or a .pub file (repeatable; the "
        "adapters' --curve-key .pub files); needs --curve-key",
    )
    add(
        "--insecure",
        action="store_true",
        help="publish without keys off loopback (refused otherwise)",
    )


def config_from_args(argv: Sequence[str]) -> SourceConfig:
    """Build a :class:`SourceConfig` from command-line arguments.

    Raises:
        SystemExit: bad arguments (argparse's usual exit code 2).
    """
    parser = build_parser()
    return _config(parser, settings.parse(parser, list(argv), no_env=frozenset({"insecure"})).args)


def _config(parser: argparse.ArgumentParser, args: argparse.Namespace) -> SourceConfig:
    if args.streams:
        streams = tuple(s.strip() for s in args.streams.split(",") if s.strip())
    elif args.endpoint:
        streams = tuple(name for name, _e in args.endpoint)
    else:
        streams = DEFAULT_STREAMS
    try:
        return SourceConfig(
            streams=streams,
            endpoints=tuple(args.endpoint),
            bind_host=args.bind_host,
            symbols=args.symbols,
            seed=args.seed,
            epoch_ns=args.epoch_ns,
            rate=args.rate,
            seconds=args.seconds,
            count=args.count,
            batch=args.batch,
            malformed_every=args.malformed_every,
            poison_every=args.poison_every,
            wait_subscribers=args.wait_subscribers,
            wait_timeout_s=args.wait_timeout,
            sndhwm=args.sndhwm,
            max_stall_s=args.max_stall,
            linger_ms=args.linger_ms,
            start_seq=args.start_seq,
            pregenerate=args.pregenerate,
            due_stamps=args.due_stamps,
            curve_key=args.curve_key,
            allowed_keys=tuple(args.allow_key),
            insecure=args.insecure,
        )
    except ValueError as exc:
        parser.error(str(exc))


def _source(config: SourceConfig, args: argparse.Namespace) -> PlainSource:
    if not args.file:
        return PlainSource(config)
    if args.as_fast_as_possible:
        rate, speed = None, None
    elif args.speed is not None:
        rate, speed = None, args.speed
    else:
        rate, speed = (args.rate or None), None
    if args.burst is not None and rate is None:
        raise ValueError("--burst needs a --rate to go on at")
    face = capture_named(args.format)
    if speed is not None and face.time_of is None:
        raise ValueError(f"--speed: an {face.name} capture is played at --rate (or as fast as possible)")
    return CapturePlayback.from_file(
        config, args.file, face, rate=rate, speed=speed, burst=args.burst, progress=args.progress
    )


def main(argv: list[str]) -> int:
    """Run ``feedha source``: print the endpoints as a JSON line, send, then print the summary line.

    Returns:
        0, or 1 if waiting for subscribers timed out.
    """
    parser = build_parser()
    args = settings.parse(parser, argv, no_env=frozenset({"insecure"})).args
    logs.configure_from(args)
    config = _config(parser, args)
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    try:
        source = _source(config, args)
        endpoints = source.bind()
    except (OSError, ValueError) as exc:  # an unreadable capture; a key file (ConfigError is a ValueError)
        print(f"feedha source: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"endpoints": endpoints}), flush=True)
    settle_heap()  # set up: collections walk only what comes after (feedha.runtime)
    summary = source.run(stop)  # closes its sockets: what they still hold waits up to --linger-ms
    # Deliver that now, before the summary says it was sent. Left to the interpreter's exit, the
    # flush depended on the collector finalizing the context, which a settled heap never does: the
    # process ended with frames still queued (a 500-message burst arrived whole at neither adapter).
    zmq.Context.instance().destroy(linger=0)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    if summary.error:
        print(f"feedha source: {summary.error}", file=sys.stderr)
    print(summary.to_json(), flush=True)
    return 1 if summary.error else 0
