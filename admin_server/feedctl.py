"""``feedctl``: the operators' gRPC CLI for the admin server (admin role).

Usage::

    feedctl [--admin-server HOST:PORT] [--key-id ID --secret S]
            [--tls] [--tls-ca F] [--tls-cert F --tls-key F] [--json] COMMAND
      adapters [--channel C]           table: channel, adapter, role, term, msg_seq, sync, health,
                                       lag, up, format (the input format)
      subscriptions                    every subscription
      failover CHANNEL [--to ADAPTER]  demote the active, promote a backup (term + 1)
      fail ADAPTER [--reason TEXT]     take an adapter off line
      throttle ADAPTER RATE            limit an adapter's rate (messages/s; 0 = no limit)
      session end CHANNEL [--reason T] end the channel's trading session now (its active proposes
                                       the boundary; every line rolls at the same msg_seq)
      purge CHANNEL MSG_SEQ [--to MSG_SEQ] --reason TEXT
                                       purge messages still pending on the delayed line
      purge CHANNEL --all-pending --reason TEXT
                                       purge everything the delayed line has not reached
      watch [--count N]                live events

The options before COMMAND may also follow it (``feedctl adapters --json``).
Credentials come from ``--key-id/--secret`` or ``FEEDHA_KEY_ID``/``FEEDHA_SECRET``;
the server from ``--admin-server`` or ``FEEDHA_ADMIN_SERVER`` (default 127.0.0.1:50051);
every option can also be set by a ``FEEDHA_<OPTION>`` variable or in a
``--config`` YAML file (``feedha.settings``).
TLS: ``--tls-ca`` verifies the server with that CA (``--tls`` alone: the system
roots); ``--tls-cert/--tls-key`` present a client certificate, which a server
with ``tls_client_ca`` requires.
Exit codes: 0 ok, 1 refused by the server (printed as CODE (REASON): message,
with the request fields at fault), 2 usage or connection error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format

from feedha import extras, settings
from feedha.admin_client.channel import (
    PlaintextRefused,
    TlsFileError,
    add_tls_arguments,
    login,
    open_channel,
    tls_from_files,
)
from feedha.admin_client.errors import status_details
from feedha.proto import admin_pb2, admin_pb2_grpc
from feedha.proto.registry import DEFAULT_INPUT_FORMAT

DEFAULT_TARGET = "127.0.0.1:50051"
TIMEOUT_S = 10.0
WAIT_POLL_S = 0.25  # failover --wait: how often the refused request is asked again
_WAIT_REASONS = frozenset({"NOT_IN_SYNC", "FAILOVER_IN_PROGRESS"})
PAGE_SIZE = 500  # adapters or subscriptions per List call; feedctl reads every page
Metadata = tuple[tuple[str, str], ...]


def _enum(name: str, prefix: str) -> str:
    return name.removeprefix(prefix).lower()


def _adapter_row(info: admin_pb2.AdapterInfo) -> dict[str, Any]:
    reg, status = info.registration, info.status
    return {
        "channel": reg.channel_name,
        "adapter": reg.adapter_id,
        "role": _enum(admin_pb2.AdapterRole.Name(status.role), "ADAPTER_ROLE_"),
        "term": status.term,
        "msg_seq": status.next_msg_seq,
        "sync": _enum(admin_pb2.SyncStatus.Name(status.sync_status), "SYNC_STATUS_"),
        "health": round(status.health_score, 1),
        "lag": status.lag,
        "up": info.is_up,
        "line": reg.line_endpoint,
        "format": reg.input_format or DEFAULT_INPUT_FORMAT,
    }


def _table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    cells = [[str(row[c]) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def _print(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, sort_keys=True) if args.json else text, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="feedctl", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-V", "--version", action="version", version=f"feedctl (feedha) {extras.version()}")
    parser.add_argument(
        "--config", type=Path, metavar="FILE", help="YAML file of settings (keys: the options)"
    )
    parser.add_argument("--admin-server", default=None, help="HOST:PORT of the admin server")
    parser.add_argument("--key-id", default=None, help="API key id (or FEEDHA_KEY_ID)")
    parser.add_argument("--secret", default=None, help="API key secret (or FEEDHA_SECRET)")
    parser.add_argument("--tls", action="store_true", help="connect with TLS (system roots unless --tls-ca)")
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="allow plaintext gRPC to a server that is not on loopback (refused otherwise)",
    )
    add_tls_arguments(parser)
    parser.add_argument("--ca", dest="tls_ca", type=Path, help=argparse.SUPPRESS)  # the old name of --tls-ca
    parser.add_argument("--json", action="store_true", help="print JSON")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_adapter_commands(sub)
    _add_channel_commands(sub)
    watch = sub.add_parser("watch", help="print live events")
    watch.add_argument("--count", type=int, default=0, help="stop after N events (0: forever)")
    settings.share_options(parser)
    return parser


def _add_adapter_commands(sub: Any) -> None:
    # adapters, subscriptions, failover, fail, throttle
    adapters = sub.add_parser("adapters", help="list adapters")
    adapters.add_argument("--channel", help="only this channel's adapters")
    sub.add_parser("subscriptions", help="list subscriptions")
    failover = sub.add_parser(
        "failover",
        help="fail a channel over by hand",
        description="Demote the channel's active and promote a backup, both at term + 1. Without "
        "--force the target must be reported in sync (refused NOT_IN_SYNC otherwise: nothing is "
        "sent, the active stays), and the next failover waits until this one is reported done "
        "(FAILOVER_IN_PROGRESS, a few seconds at most). --wait repeats the request while either holds.",
    )
    failover.add_argument("channel")
    failover.add_argument("--to", default="", help="adapter to promote (default: best in-sync backup)")
    failover.add_argument(
        "--force",
        action="store_true",
        help="promote even a backup that is not in sync (when no member can confirm the numbering, "
        "e.g. the furthest member failed: messages past the target's position are numbered again)",
    )
    failover.add_argument(
        "--wait",
        type=_seconds,
        default=0.0,
        metavar="SECONDS",
        help="while the target is not in sync yet or the previous failover is not reported done, "
        "ask again for up to SECONDS (a fresh channel's backups are in sync after the first "
        "messages; default: ask once)",
    )
    fail = sub.add_parser("fail", help="take an adapter off line")
    fail.add_argument("adapter")
    fail.add_argument("--reason", default="")
    throttle = sub.add_parser("throttle", help="limit an adapter's publishing rate")
    throttle.add_argument("adapter")
    throttle.add_argument("rate", type=float)


def _add_channel_commands(sub: Any) -> None:
    # session end, purge
    session = sub.add_parser("session", help="the channel's trading session")
    session_sub = session.add_subparsers(dest="session_command", required=True)
    end = session_sub.add_parser(
        "end",
        help="end the channel's trading session now: its active proposes the boundary, the group "
        "agrees, every line carries the end-of-session block at the same msg_seq",
    )
    end.add_argument("channel")
    end.add_argument("--reason", default="", help="for the audit log and the adapters' logs")
    purge = sub.add_parser(
        "purge",
        help="purge messages still pending on a channel's delayed line",
        description="Purge messages of CHANNEL that the delayed line has not sent yet: MSG_SEQ (through "
        "--to), or everything pending (--all-pending). The channel's active adapter decides: a message "
        "already delivered on the delayed line (or due within its margin) is refused, and the reply says "
        "from which msg_seq on purges are still possible. Delayed subscribers get a Purged event (a "
        "tombstone) in each purged message's place; retransmissions honour purges too. Audited.",
    )
    purge.add_argument("channel")
    purge.add_argument("msg_seq", nargs="?", type=_msg_seq, help="the first msg_seq to purge")
    purge.add_argument(
        "--to", type=_msg_seq, default=0, metavar="MSG_SEQ", help="the last msg_seq (inclusive)"
    )
    purge.add_argument("--all-pending", action="store_true", help="everything the delayed line has not sent")
    purge.add_argument("--reason", required=True, help="why (kept with the purge, shown to subscribers)")


async def _pages(call: Any, request: Any, field: str, md: Metadata) -> list[Any]:
    # Every page of a List call: ask again with the token until it is "".
    items: list[Any] = []
    while True:
        reply = await call(request, metadata=md, timeout=TIMEOUT_S)
        items += getattr(reply, field)
        if not reply.next_page_token:
            return items
        request.page_token = reply.next_page_token


async def _adapters(stub: Any, args: argparse.Namespace, md: Metadata) -> None:
    request = admin_pb2.ListAdaptersRequest(page_size=PAGE_SIZE, channel_name=args.channel or "")
    rows = [_adapter_row(a) for a in await _pages(stub.ListAdapters, request, "adapters", md)]
    columns = ("channel", "adapter", "role", "term", "msg_seq", "sync", "health", "lag", "up", "format")
    _print(args, rows, _table(rows, columns))


async def _subscriptions(stub: Any, args: argparse.Namespace, md: Metadata) -> None:
    request = admin_pb2.ListSubscriptionsRequest(page_size=PAGE_SIZE)
    found = await _pages(stub.ListSubscriptions, request, "subscriptions", md)
    rows = [{"subscription": s.subscription_id, "user": s.user, "symbols": list(s.symbols)} for s in found]
    text_rows = [{**r, "symbols": ",".join(r["symbols"])} for r in rows]
    _print(args, rows, _table(text_rows, ("subscription", "user", "symbols")))


async def _failover(stub: Any, args: argparse.Namespace, md: Metadata) -> Any:
    # With --wait, NOT_IN_SYNC and FAILOVER_IN_PROGRESS are asked again (they send nothing).
    request = admin_pb2.FailoverRequest(channel_name=args.channel, to_adapter_id=args.to, force=args.force)
    loop = asyncio.get_running_loop()
    deadline, told = loop.time() + args.wait, ""
    while True:
        try:
            return await stub.Failover(request, metadata=md, timeout=TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            reason = status_details(exc).reason
            if reason not in _WAIT_REASONS or loop.time() + WAIT_POLL_S > deadline:
                raise
            if reason != told:
                print(f"feedctl: waiting ({reason}): {exc.details()}", file=sys.stderr)
                told = reason
            await asyncio.sleep(WAIT_POLL_S)  # a poll with a deadline: the registry sends no event for it


async def _command(stub: Any, args: argparse.Namespace, md: Metadata) -> None:
    if args.command == "failover":
        reply: Any = await _failover(stub, args, md)
    elif args.command == "fail":
        request: Any = admin_pb2.FailAdapterRequest(adapter_id=args.adapter, reason=args.reason)
        reply = await stub.FailAdapter(request, metadata=md, timeout=TIMEOUT_S)
    elif args.command == "session":
        request = admin_pb2.EndSessionRequest(channel_name=args.channel, reason=args.reason)
        reply = await stub.EndSession(request, metadata=md, timeout=TIMEOUT_S)
    else:
        request = admin_pb2.ThrottleRequest(adapter_id=args.adapter, rate=args.rate)
        reply = await stub.Throttle(request, metadata=md, timeout=TIMEOUT_S)
    rows = [
        {
            "adapter": s.adapter_id,
            "command": _enum(admin_pb2.CommandKind.Name(s.command.kind), "COMMAND_KIND_"),
            "term": s.command.term,
            "rate": s.command.rate,
        }
        for s in reply.sent
    ]
    _print(args, rows, "\n".join(f"sent {r['command']} to {r['adapter']} (term {r['term']})" for r in rows))


def _seconds(value: str) -> float:
    """A wait on the command line: 0..3600 seconds."""
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not 0 <= seconds <= 3600:  # also refuses nan
        raise argparse.ArgumentTypeError(f"--wait is 0..3600 seconds, got {value}")
    return seconds


def _msg_seq(value: str) -> int:
    """A msg_seq on the command line: a whole number 0..2^64-1 (the server says which it refuses)."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a msg_seq: {value!r}") from None
    if not 0 <= number < 2**64:
        raise argparse.ArgumentTypeError(f"a msg_seq is 0..2^64-1, got {number}")
    return number


async def _purge(stub: Any, args: argparse.Namespace, md: Metadata) -> None:
    if args.all_pending == (args.msg_seq is not None):
        raise ValueError("give a MSG_SEQ (and --to) or --all-pending, not both or neither")
    request = admin_pb2.PurgeRequest(
        channel_name=args.channel,
        first_msg_seq=args.msg_seq or 0,
        last_msg_seq=args.to,
        all_pending=args.all_pending,
        reason=args.reason,
    )
    reply = await stub.Purge(request, metadata=md, timeout=TIMEOUT_S)
    data = json_format.MessageToDict(
        reply, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    unconfirmed = list(reply.unconfirmed_adapter_ids)
    span = f"msg_seq {reply.first_msg_seq}..{reply.last_msg_seq} ({reply.count} messages)"
    text = f"purge {reply.purge_id}: {span} accepted by {reply.adapter_id}"
    if unconfirmed:
        text += f"; not yet confirmed by {', '.join(unconfirmed)}"
    _print(args, data, text)


async def _watch(stub: Any, args: argparse.Namespace, md: Metadata) -> None:
    seen = 0
    async for event in stub.WatchEvents(admin_pb2.WatchEventsRequest(), metadata=md):
        kind = _enum(admin_pb2.EventKind.Name(event.kind), "EVENT_KIND_")
        data = json_format.MessageToDict(event, preserving_proto_field_name=True)
        data["kind"] = kind
        text = f"{kind:<10} {event.channel_name:<10} {event.adapter_id:<12} {event.detail}"
        _print(args, data, text.rstrip())
        seen += 1
        if args.count and seen >= args.count:
            return


async def _run(args: argparse.Namespace, key_id: str, secret: str, target: str) -> int:
    tls = tls_from_files(args.tls_ca, args.tls_cert, args.tls_key, enabled=args.tls)
    async with open_channel(target, tls or (False if args.insecure else None)) as channel:
        md = (await login(channel, key_id, secret, timeout_s=TIMEOUT_S)).metadata
        stub = admin_pb2_grpc.AdminControlStub(channel)  # type: ignore[no-untyped-call]
        if args.command == "adapters":
            await _adapters(stub, args, md)
        elif args.command == "subscriptions":
            await _subscriptions(stub, args, md)
        elif args.command in ("failover", "fail", "throttle", "session"):
            await _command(stub, args, md)
        elif args.command == "purge":
            await _purge(stub, args, md)
        elif args.command == "watch":
            await _watch(stub, args, md)
    return 0


def _refusal(exc: grpc.aio.AioRpcError) -> str:
    """``CODE (REASON): message``, and the fields at fault, from the status and its details."""
    found = status_details(exc)
    head = exc.code().name + (f" ({found.reason})" if found.reason else "")
    fields = "".join(f"\n  {v.field}: {v.description}" for v in found.violations)
    return f"{head}: {exc.details()}{fields}"


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``feedctl``.

    Args:
        argv: arguments without the program name; defaults to ``sys.argv[1:]``.

    Returns:
        The exit code.
    """
    args = settings.parse(
        _parser(), sys.argv[1:] if argv is None else argv, no_env=frozenset({"insecure"})
    ).args
    key_id, secret = args.key_id or "", args.secret or ""
    target = args.admin_server or DEFAULT_TARGET
    if not key_id or not secret:
        print(
            "feedctl: credentials needed: --key-id/--secret or FEEDHA_KEY_ID/FEEDHA_SECRET", file=sys.stderr
        )
        return 2
    try:
        return asyncio.run(_run(args, key_id, secret, target))
    except grpc.aio.AioRpcError as exc:
        code = exc.code()
        print(f"feedctl: {_refusal(exc)}", file=sys.stderr)
        return 2 if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) else 1
    except (OSError, TlsFileError, PlaintextRefused, ValueError) as exc:
        print(f"feedctl: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
