"""``feedha subscribe``: a console subscriber that prints what a channel delivers.

Usage::

    feedha subscribe --channel EQ1=1 --line tcp://127.0.0.1:5601 --line tcp://127.0.0.1:5602 \\
        [--count N] [--seconds S] [--json] [--books] [--start-seq SEQ] [--fill-timeout S] [--loss-timeout S]
    feedha subscribe --key-file USER.json [--admin HOST:PORT] --channel NAME [--symbols P ...] \\
        [--tls-ca F [--tls-cert F --tls-key F]] [--count N] [--seconds S] [--json] [--books]

The first form joins the given lines directly. The second logs in to the
admin server with the API key in the key file (JSON with ``key_id``,
``secret`` and optionally ``admin``, as ``feedha up`` writes them),
subscribes to ``--symbols`` (default ``*``: every entitled symbol) and
follows the routes it is given, with CURVE where the adapters need it.

Each delivery is printed as one line (text, or one JSON object per line with
``--json``), as are gap and term events; a stats summary closes the output.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from feedha import logs, settings
from feedha.admin_client import AdminClientError, TlsConfig, add_tls_arguments, tls_from_files
from feedha.client.arbiter_stats import ArbiterStats
from feedha.client.books import BookKeeper, BookUpdate
from feedha.client.errors import ClientError, ConfigError, ProtocolError
from feedha.client.events import FILL_TIMEOUT_S, LOSS_TIMEOUT_S, Delivery, Event
from feedha.client.subscriber import RCVHWM, ChannelSpec, Subscriber, SubscriberConfig


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="feedha subscribe",
        description="Join every line of a channel and print what it delivers. Every option is also a key "
        "of the --config file and a FEEDHA_<OPTION> variable.",
    )
    parser.add_argument("--channel", required=True, help="NAME=NUMBER (or NAME to adopt the number)")
    parser.add_argument("--line", action="append", default=[], help="a line endpoint; repeat per line")
    parser.add_argument("--key-file", help="log in with this API key file (JSON) instead of naming lines")
    parser.add_argument("--admin", help="the admin server host:port (default: the key file's)")
    parser.add_argument("--symbols", nargs="+", default=["*"], help="symbols or patterns (with --key-file)")
    parser.add_argument(
        "--multicast-interface",
        metavar="ADDR",
        default="",
        help="with --key-file: this host's IPv4 address to join multicast lines on (they name the adapter's)",
    )
    add_tls_arguments(parser)
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="allow plaintext gRPC to an admin server that is not on loopback (refused otherwise)",
    )
    parser.add_argument("--count", type=int, help="stop after this many deliveries")
    parser.add_argument("--seconds", type=float, help="stop after this many seconds")
    parser.add_argument("--json", action="store_true", help="print one JSON object per line")
    parser.add_argument(
        "--books",
        action="store_true",
        help="fix44 channels: print each symbol's book update (changes and the book after them)",
    )
    parser.add_argument("--start-seq", type=int, help="first msg_seq to deliver (resume)")
    parser.add_argument(
        "--fill-timeout", type=float, default=FILL_TIMEOUT_S, help="seconds before asking retransmission"
    )
    parser.add_argument(
        "--loss-timeout", type=float, default=LOSS_TIMEOUT_S, help="seconds before a gap is lost"
    )
    parser.add_argument(
        "--rcvhwm", type=int, default=RCVHWM, help="ZeroMQ receive high-water mark (0: unbounded)"
    )
    settings.add_common_arguments(parser, log_level="WARNING")
    return parser


def parse_channel(text: str) -> tuple[str, int | None]:
    """Parse ``NAME=NUMBER`` (or ``NAME``).

    Raises:
        ConfigError: empty name or a number that is not a u16.
    """
    name, _, number = text.partition("=")
    if not name:
        raise ConfigError("--channel", text, "expected NAME=NUMBER")
    if not number:
        return name, None
    if not number.isdigit() or int(number) > 0xFFFF:
        raise ConfigError("--channel", text, "the channel number must be an integer 0..65535")
    return name, int(number)


def build(args: argparse.Namespace) -> tuple[ChannelSpec, SubscriberConfig]:
    """Turn parsed arguments into the subscriber's channel spec and config.

    Raises:
        ConfigError: a bad value, naming the option.
    """
    if args.count is not None and args.count < 1:
        raise ConfigError("--count", args.count, "must be >= 1")
    if args.seconds is not None and args.seconds <= 0:
        raise ConfigError("--seconds", args.seconds, "must be > 0")
    name, number = parse_channel(args.channel)
    if not args.line:
        raise ConfigError("--line", None, "give the lines (--line, repeated) or a --key-file to log in with")
    spec = ChannelSpec(name, number, tuple(args.line), start_seq=args.start_seq)
    config = SubscriberConfig(
        rcvhwm=args.rcvhwm, fill_timeout=args.fill_timeout, loss_timeout=args.loss_timeout
    )
    return spec, config


def describe(event: Event) -> dict[str, Any]:
    """A JSON-ready description of one event."""
    if not isinstance(event, Delivery):
        fields = {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}
        if not fields.get("channel_name"):
            fields.pop("channel_name", None)
        return {"event": type(event).__name__, **fields}
    out: dict[str, Any] = {
        "event": "Delivery",
        "channel": event.channel,
        "msg_seq": event.msg_seq,
        "line": event.line,
        "term": event.term,
    }
    try:
        update = event.update
    except ProtocolError as exc:
        out["error"] = str(exc)
        return out
    state = update.state
    out.update(symbol=update.symbol, last=state.last, volume=state.volume, vwap=state.vwap)
    out.update(high=state.high, low=state.low, bid=state.bid, ask=state.ask, trades=state.trade_count)
    return out


def describe_all(event: Event, books: Callable[[Delivery], list[BookUpdate]] | None) -> list[dict[str, Any]]:
    """What to print for one event: with ``books`` (a delivery's book updates), a fix44 delivery's."""
    if books is None or not isinstance(event, Delivery):
        return [describe(event)]
    try:
        updates = books(event)
    except ProtocolError:
        return [describe(event)]
    if not updates:
        return [describe(event)]
    return [describe_book(update) for update in updates]


def _keeper(enabled: bool) -> Callable[[Delivery], list[BookUpdate]] | None:
    # Every symbol's books (the direct form subscribes to whole channels).
    if not enabled:
        return None
    keeper = BookKeeper()
    return lambda event: keeper.observe(event.msg_seq, event.update, is_image=event.is_image)


def describe_book(update: BookUpdate) -> dict[str, Any]:
    """A JSON-ready description of one book update: the changes and the book after them."""
    book = update.book
    return {
        "event": "BookUpdate",
        "msg_seq": update.msg_seq,
        "symbol": update.symbol,
        "changes": [
            [_ACTIONS.get(c.action, "?"), "bid" if c.side == 1 else "ask", c.level, c.price, c.size]
            for c in update.changes
        ],
        "trades": [[t.price, t.size] for t in update.trades],
        "bids": [[price, size] for price, size, _orders in book.bids],
        "asks": [[price, size] for price, size, _orders in book.asks],
        "stats": book.stats,
    }


_ACTIONS = {1: "insert", 2: "change", 3: "delete"}


def _text(fields: dict[str, Any]) -> str:
    if fields["event"] == "BookUpdate":
        best_bid = fields["bids"][0] if fields["bids"] else "-"
        best_ask = fields["asks"][0] if fields["asks"] else "-"
        return (
            f"#{fields['msg_seq']} {fields['symbol']:<8} bid={best_bid} ask={best_ask} "
            f"levels={len(fields['bids'])}/{len(fields['asks'])} changes={len(fields['changes'])}"
        )
    if fields["event"] != "Delivery":
        return " ".join(f"{key}={value}" for key, value in fields.items())
    if "error" in fields:
        return f"#{fields['msg_seq']} line={fields['line']} {fields['error']}"
    return (
        f"#{fields['msg_seq']} {fields['symbol']:<8} last={fields['last']:.4f} volume={fields['volume']} "
        f"vwap={fields['vwap']:.4f} bid={fields['bid']:.4f} ask={fields['ask']:.4f} line={fields['line']}"
    )


def _summary(name: str, stats: ArbiterStats, elapsed: float) -> dict[str, Any]:
    summary: dict[str, Any] = {"event": "Summary", "channel": name, "seconds": round(elapsed, 3)}
    for key in ("delivered", "duplicates", "conflicts", "late", "stale", "garbage", "gaps"):
        summary[key] = getattr(stats, key)
    summary.update(
        retransmission_requests=stats.retransmission_requests,
        lost=stats.lost,
        highest_term=stats.highest_term,
        active_line=stats.active_line,
        next_seq=stats.next_seq,
        lines=[
            {
                "line": ls.line,
                "adapter": ls.adapter,
                "packets": ls.packets,
                "first_copies": ls.first_copies,
                "garbage": ls.garbage,
            }
            for ls in stats.lines
        ],
    )
    return summary


def run(spec: ChannelSpec, config: SubscriberConfig, args: argparse.Namespace, out: TextIO) -> int:
    """Subscribe and print until ``--count`` deliveries, ``--seconds``, or Ctrl-C."""
    render = json.dumps if args.json else _text
    started = time.monotonic()
    until = None if args.seconds is None else started + args.seconds
    delivered = 0
    books = _keeper(args.books)
    with Subscriber([spec], config) as subscriber:
        try:
            while args.count is None or delivered < args.count:
                remaining = None if until is None else until - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                for event in subscriber.poll(remaining):
                    for fields in describe_all(event, books):
                        print(render(fields), file=out)
                    delivered += isinstance(event, Delivery)
                    if delivered == args.count:
                        break
        except KeyboardInterrupt:
            pass
        summary = _summary(spec.name, subscriber.stats()[spec.name], time.monotonic() - started)
    print(render(summary), file=out)
    out.flush()
    return 0


def run_logged_in(args: argparse.Namespace, out: TextIO) -> int:
    """The ``--key-file`` form: log in, subscribe, print what the named channel delivers."""
    from feedha.client.feed_client import FeedClient

    admin, key_id, secret, tls = _credentials(args)
    name, _number = parse_channel(args.channel)
    render = json.dumps if args.json else _text
    started = time.monotonic()
    config = SubscriberConfig(multicast_interface=args.multicast_interface)
    with FeedClient(admin, key_id, secret, config=config, tls=tls) as client:
        routes = {r.channel_name: r for r in client.subscribe(args.symbols).routes}
        if name not in routes or routes[name].delayed:
            if name in routes:
                why = "is delayed-only for this user: the delayed stream is not served yet"
            else:
                why = f"carries none of the symbols asked for (routes: {', '.join(routes) or 'none'})"
            print(f"feedha subscribe: channel {name} {why}", file=sys.stderr)
            return 1
        delivered = _print_channel(client, name, args, started, out)
        stats = client.stats().channels.get(name)
    summary = {
        "event": "Summary",
        "channel": name,
        "delivered": delivered,
        "seconds": round(time.monotonic() - started, 3),
    }
    if stats is not None:
        summary.update(_summary(name, stats, time.monotonic() - started), delivered=delivered)
    print(render(summary), file=out)
    out.flush()
    return 0


def _credentials(args: argparse.Namespace) -> tuple[str, str, str, TlsConfig | bool | None]:
    # The admin server, key id, secret and TLS settings from the key file and the options.
    try:
        key = json.loads(open(args.key_file, encoding="utf-8").read())
        admin, key_id, secret = args.admin or key["admin"], key["key_id"], key["secret"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            "--key-file", args.key_file, f"not a key file with key_id and secret: {exc}"
        ) from exc
    try:
        tls = tls_from_files(args.tls_ca, args.tls_cert, args.tls_key) or (False if args.insecure else None)
    except ValueError as exc:
        raise ConfigError("--tls-cert/--tls-key", args.tls_cert or args.tls_key, str(exc)) from exc
    return admin, key_id, secret, tls


def _print_channel(client: Any, name: str, args: argparse.Namespace, started: float, out: TextIO) -> int:
    # Print the channel's deliveries and status events until --count, --seconds or Ctrl-C;
    # returns how many deliveries were printed.
    render = json.dumps if args.json else _text
    until = None if args.seconds is None else started + args.seconds
    delivered = 0
    # The client's own books: only the subscribed symbols of a block that carries several.
    books = client.book_updates_of if args.books else None
    try:
        while args.count is None or delivered < args.count:
            remaining = None if until is None else until - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            batch = client.poll_events(remaining if remaining is not None else 1.0)
            number = _channel_number(client, name) if batch else None
            for event in batch:
                if not isinstance(event, Delivery):  # a status event: gap, failover, stale ...
                    if event.channel_name == name:
                        print(render(describe(event)), file=out)
                    continue
                if event.channel != number:
                    continue  # another channel of the subscription
                for fields in describe_all(event, books):
                    print(render(fields), file=out)
                delivered += 1
                if delivered == args.count:
                    break
    except KeyboardInterrupt:
        pass
    return delivered


def _channel_number(client: Any, name: str) -> int | None:
    stats = client.stats().channels.get(name)
    return None if stats is None else stats.channel


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``feedha subscribe``.

    Args:
        argv: arguments without the program and command names.

    Returns:
        0 on success, 2 on bad arguments, 1 on a transport error.
    """
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        args = settings.parse(_parser(), argv, no_env=frozenset({"insecure"})).args
    except SystemExit as exc:  # --help or an argparse error
        return exc.code if isinstance(exc.code, int) else 2
    logs.configure_from(args)
    try:
        if args.key_file:
            return run_logged_in(args, sys.stdout)
        spec, config = build(args)
        return run(spec, config, args, sys.stdout)
    except ConfigError as exc:
        print(f"feedha subscribe: {exc}", file=sys.stderr)
        return 2
    except (ClientError, AdminClientError) as exc:
        print(f"feedha subscribe: {exc}", file=sys.stderr)
        return 1
