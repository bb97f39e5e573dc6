"""``feedha replay``: print what a channel published in a window of time, from its replay services.

Usage::

    feedha replay CHANNEL --from TIME --to TIME [--speed X] --key-file USER.json [--symbols P ...] [--json]
    feedha replay NUMBER --from TIME --to TIME [--speed X] --service tcp://127.0.0.1:5701 [--service ...]

The first form logs in with the API key in the key file (as ``feedha
subscribe --key-file`` does), subscribes to ``--symbols`` (default ``*``) to
learn the channel's replay services and the entitlement, and replays; the
second asks the named replay services directly (no CURVE). A TIME is ISO 8601
(``2026-11-24T09:30:00Z``; no zone: UTC), seconds since the Unix epoch, or
relative to now: ``now``, ``now-90s``, ``now-5m``, ``now-1h`` (or
``--from=-5m``). The window is
``from <= publish time < to``; with ``--speed`` it is played at that many
times real time, else as fast as the terminal reads. Each update is printed
as ``feedha subscribe`` prints one; a summary closes the output.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from feedha import logs, settings
from feedha.admin_client import AdminClientError, add_tls_arguments
from feedha.client._time_replay import TimeReplay, replay_window, to_ns
from feedha.client.console import _credentials, _text, describe
from feedha.client.errors import ClientError, ConfigError
from feedha.client.events import Delivery, StatusEvent
from feedha.client.replay_client import ReplayClient

_RELATIVE = re.compile(r"(?:now)?-(\d+(?:\.\d+)?)([smhd])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="feedha replay",
        description="Replay a window of a channel's messages by time from its adapters' journals.",
    )
    parser.add_argument("channel", help="the channel's name (with --key-file) or number (with --service)")
    parser.add_argument(
        "--from", dest="start", required=True, help="window start: ISO 8601, epoch seconds, now-90s"
    )
    parser.add_argument("--to", dest="end", required=True, help="window end (exclusive), as --from")
    parser.add_argument("--speed", type=float, help="times real time (default: as fast as printed)")
    parser.add_argument("--key-file", help="log in with this API key file (JSON)")
    parser.add_argument("--admin", help="the admin server host:port (default: the key file's)")
    parser.add_argument("--symbols", nargs="+", default=["*"], help="symbols or patterns (with --key-file)")
    parser.add_argument("--service", action="append", default=[], help="a replay endpoint (no login)")
    add_tls_arguments(parser)
    parser.add_argument("--insecure", action="store_true", help="allow plaintext gRPC off loopback")
    parser.add_argument("--json", action="store_true", help="print one JSON object per line")
    settings.add_common_arguments(parser, log_level="WARNING")
    return parser


def parse_time(text: str, *, now: float | None = None) -> int:
    """A TIME option as ns since the Unix epoch (see the module docstring).

    Raises:
        ConfigError: not a time in one of the forms.
    """
    now = time.time() if now is None else now
    if text == "now":
        return to_ns(now)
    relative = _RELATIVE.fullmatch(text)
    if relative:
        return to_ns(now - float(relative.group(1)) * _UNIT_S[relative.group(2)])
    try:
        return to_ns(float(text))
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(
            "TIME", text, "expected ISO 8601, seconds since the epoch, now, or now-90s/now-5m/now-1h"
        ) from None
    return to_ns(moment if moment.tzinfo else moment.replace(tzinfo=UTC))


def _window(args: argparse.Namespace, number: int) -> TimeReplay:
    start, end = parse_time(args.start), parse_time(args.end)
    if end <= start:
        raise ConfigError("--to", args.end, f"must be after --from ({args.start})")
    if args.speed is not None and not args.speed > 0:
        raise ConfigError("--speed", args.speed, "must be > 0")
    return TimeReplay(number, start, end, args.speed, channel_name=args.channel)


def _direct(args: argparse.Namespace) -> Iterator[Delivery | StatusEvent]:
    if not args.channel.isdigit() or int(args.channel) > 0xFFFF:
        raise ConfigError("channel", args.channel, "with --service, name the channel by number (0..65535)")
    window = _window(args, int(args.channel))
    client = ReplayClient({window.channel: args.service}, timeout=2.0, budget=2.0)
    try:
        yield from replay_window(client, window)
    finally:
        client.close()


def _logged_in(args: argparse.Namespace) -> Iterator[Delivery | StatusEvent]:
    from feedha.client.feed_client import FeedClient

    admin, key_id, secret, tls = _credentials(args)
    window = _window(args, 0)
    with FeedClient(admin, key_id, secret, tls=tls) as client:
        client.subscribe(args.symbols)
        channel: int | str = int(args.channel) if args.channel.isdigit() else args.channel
        start, end = window.start_ns / 1e9, window.end_ns / 1e9
        yield from client.replay(channel, start, end, speed=window.speed)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Replay and print; returns the exit code."""
    if bool(args.key_file) == bool(args.service):
        raise ConfigError(
            "--key-file/--service", None, "give a key file to log in with, or the replay services"
        )
    render = json.dumps if args.json else _text
    began = time.monotonic()
    counts: dict[str, Any] = {"delivered": 0, "events": 0}
    events = _logged_in(args) if args.key_file else _direct(args)
    try:
        for event in events:
            print(render(describe(event)), file=out)
            counts["delivered" if isinstance(event, Delivery) else "events"] += 1
    except KeyboardInterrupt:
        pass
    summary = {"event": "Summary", "channel": args.channel, **counts}
    print(render({**summary, "seconds": round(time.monotonic() - began, 3)}), file=out)
    out.flush()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``feedha replay``: 0 on success, 2 on bad arguments, 1 when the replay failed."""
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        args = settings.parse(_parser(), argv, no_env=frozenset({"insecure"})).args
    except SystemExit as exc:  # --help or an argparse error
        return exc.code if isinstance(exc.code, int) else 2
    logs.configure_from(args)
    try:
        return run(args, sys.stdout)
    except ConfigError as exc:
        print(f"feedha replay: {exc}", file=sys.stderr)
        return 2
    except (ClientError, AdminClientError) as exc:
        print(f"feedha replay: {exc}", file=sys.stderr)
        return 1
