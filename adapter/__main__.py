"""``feedha adapter``: run one feed adapter (flags, config file, environment -> AdapterConfig -> runner).

Every option is also a key of the ``--config`` YAML file and a ``FEEDHA_*``
variable (``feedha.settings``); the secret of ``--admin-key-id`` is read from
``$FEEDHA_ADAPTER_SECRET`` only. So every adapter of a group can share one
config file, with what differs per adapter (``adapter``, ``line``, ``replay``,
``curve_key``) in its environment: ``peer: ["1=tcp://...", "2=tcp://..."]``
names every member's sync endpoint by number and each adapter skips its own,
and ``active_adapter: 1`` says which one starts as the active.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from feedha import logs, settings
from feedha.adapter.config import LINE_SNDHWM, REPLAY_MAX_BYTES, SNAPSHOT_INTERVAL_S, AdapterConfig
from feedha.adapter.conversion.budget import (
    MEMORY_HEADROOM,
    budget_from_limit,
    container_limit,
    format_size,
    parse_size,
)
from feedha.adapter.conversion.formats import INPUT_FORMATS, MAX_ORDERS
from feedha.adapter.core import sync as sync_rules
from feedha.adapter.core.config import (
    CHECKPOINT_EVERY,
    CHECKPOINT_INTERVAL_S,
    DEFAULT_CONFLATE_INTERVAL_S,
    LINE_HEARTBEAT_S,
    MAX_CONFLATE_INTERVAL_S,
    MAX_SOURCE_GAP,
    MIN_CONFLATE_INTERVAL_S,
)
from feedha.adapter.core.delayed import DEFAULT_DELAY_S, DEFAULT_MARGIN_S
from feedha.adapter.core.session import SessionSchedule
from feedha.adapter.core.sync import SyncConfig
from feedha.adapter.errors import AdapterError
from feedha.adapter.journal.config import FsyncPolicy
from feedha.admin_client.channel import add_tls_arguments
from feedha.proto.wire import DEFAULT_MAX_PACKET_BYTES
from feedha.transport.errors import TransportConfigError
from feedha.transport.http import parse_address


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="feedha adapter",
        description="Run one feed adapter of a channel's adapter group. It converts the source stream, "
        "numbers and publishes it on its line, and keeps in sync with its peers over the sync bus. "
        "Status events (ready, role changes, final counters) are printed as JSON lines on stdout. "
        "Every option is also a key of the --config file and a FEEDHA_<OPTION> variable.",
    )
    _identity_arguments(parser)
    _endpoint_arguments(parser)
    _tuning_arguments(parser)
    _admin_arguments(parser)
    _journal_arguments(parser)
    _session_arguments(parser)
    _delayed_arguments(parser)
    _conflated_arguments(parser)
    parser.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve /metrics (Prometheus), /healthz and /readyz over HTTP there (port 0 picks one; "
        "the ready event names it; default: not served)",
    )
    parser.add_argument(
        "--health",
        metavar="HOST:PORT",
        help="serve /healthz and /readyz alone on a listener of their own, so that probes never wait "
        "behind scrapes or a flood of idle connections (port 0 picks one; the ready event names it)",
    )
    settings.add_common_arguments(parser, log_level="WARNING")
    return parser


def _identity_arguments(parser: argparse.ArgumentParser) -> None:
    ident = parser.add_argument_group("identity")
    ident.add_argument("--feed", default="EQUITIES", help="feed name (default: %(default)s)")
    ident.add_argument("--channel", required=True, help="channel name, the topic of line packets")
    ident.add_argument("--channel-number", type=int, required=True, help="channel number in packet headers")
    ident.add_argument(
        "--adapter", type=int, required=True, help="this adapter's number, unique in the channel"
    )
    ident.add_argument("--active", action="store_true", help="start as the active unless one is heard first")
    ident.add_argument(
        "--active-adapter",
        type=int,
        metavar="N",
        help="the adapter of the group that starts as the active (as --active on adapter N), "
        "so every member can share one config file",
    )
    ident.add_argument("--term", type=int, default=0, help="term to start from (default: %(default)s)")


def _endpoint_arguments(parser: argparse.ArgumentParser) -> None:
    net = parser.add_argument_group("endpoints")
    net.add_argument(
        "--source", required=True, help="feed source endpoint to connect, e.g. tcp://127.0.0.1:5555"
    )
    net.add_argument("--source-stream", required=True, help="source stream name (its topic), e.g. A-M")
    net.add_argument("--source-stream-number", type=int, required=True, help="source stream number")
    net.add_argument("--line", required=True, help="line endpoint to bind, e.g. tcp://127.0.0.1:6001")
    net.add_argument("--sync", required=True, help="sync-bus endpoint to bind")
    net.add_argument(
        "--peer",
        action="append",
        default=[],
        metavar="[N=]ENDPOINT",
        help="a peer's sync endpoint (repeatable); N=ENDPOINT names adapter N's, and this adapter "
        "skips its own, so one list of every member serves the whole group",
    )
    net.add_argument("--control", help="REP endpoint for JSON control commands (status, promote, ...)")


def _tuning_arguments(parser: argparse.ArgumentParser) -> None:
    tune = parser.add_argument_group("tuning")
    tune.add_argument("--heartbeat-interval", type=float, default=sync_rules.HEARTBEAT_INTERVAL_S)
    tune.add_argument(
        "--heartbeat-timeout",
        type=float,
        default=sync_rules.HEARTBEAT_TIMEOUT_S,
        help="active silence before a backup promotes itself (default: %(default)ss)",
    )
    tune.add_argument("--startup-grace", type=float, default=sync_rules.STARTUP_GRACE_S)
    tune.add_argument("--desync-limit", type=int, default=sync_rules.DESYNC_LIMIT)
    tune.add_argument("--desync-window", type=float, default=sync_rules.DESYNC_WINDOW_S)
    tune.add_argument("--max-packet-bytes", type=int, default=DEFAULT_MAX_PACKET_BYTES)
    tune.add_argument(
        "--line-heartbeat", type=float, default=LINE_HEARTBEAT_S, help="idle line heartbeat interval"
    )
    tune.add_argument(
        "--max-source-gap",
        type=int,
        default=MAX_SOURCE_GAP,
        help="a source_seq further past the last one than this is held until three messages confirm it "
        "(default: %(default)s; a SequenceReset 35=4 moves the numbering explicitly)",
    )
    tune.add_argument(
        "--line-hwm",
        type=int,
        default=LINE_SNDHWM,
        help="packets queued per line subscriber before that subscriber's own drops begin "
        "(default: %(default)s; 0 = unbounded)",
    )
    tune.add_argument("--converters", type=Path, help="converter table YAML (default: the packaged one)")
    tune.add_argument(
        "--format",
        choices=sorted(INPUT_FORMATS),
        default="feedha-fix",
        help="the source stream's input format (default: %(default)s; docs/converters.md)",
    )
    tune.add_argument(
        "--book-depth",
        type=int,
        default=10,
        help="order-book levels per side (fix44, itch50; default: %(default)s)",
    )
    tune.add_argument(
        "--max-orders",
        type=int,
        default=MAX_ORDERS,
        help="itch50: the most live orders held; an add past it is quarantined as order_limit "
        "(the same on every adapter of a channel; default: %(default)s, if --memory-budget holds them)",
    )
    tune.add_argument(
        "--memory-budget",
        type=_size,
        metavar="SIZE",
        help="the memory this adapter may use, e.g. 768Mi or 1.5GiB: its order and symbol tables "
        "refuse a message that would take them past it (quarantined as memory_limit); the same on "
        f"every adapter of a channel (default: {round(MEMORY_HEADROOM * 100)}%% of the container's "
        "memory limit, else 768 MiB; docs/deployment.md)",
    )
    tune.add_argument(
        "--securities",
        type=Path,
        help="fix44: YAML table of SecurityID (48, or '22:48') -> symbol for entries without 55",
    )
    tune.add_argument(
        "--health-penalty", type=float, default=0.0, help="handicap on the health score (drills)"
    )
    tune.add_argument(
        "--no-source-pump",
        dest="source_pump",
        action="store_false",
        help="convert every source frame in the Python loop, never in the source pump (an adapter's "
        "receive -> convert -> send or hold turn in C; docs/architecture.md): A/B runs and diagnosis",
    )


def _admin_arguments(parser: argparse.ArgumentParser) -> None:
    admin = parser.add_argument_group("admin server")
    admin.add_argument("--admin", help="admin server host:port to register with (default: none)")
    admin.add_argument(
        "--admin-key-id",
        help="API key id of a user with the adapter role (the secret is read from $FEEDHA_ADAPTER_SECRET)",
    )
    add_tls_arguments(admin, prefix="admin-tls")
    security = parser.add_argument_group("data-plane security (docs/security.md)")
    security.add_argument(
        "--curve-key",
        type=Path,
        help="this adapter's CURVE key pair (`feedha keys new FILE`): line and replay accept only the "
        "subscriber keys the admin server grants (needs --admin). Without it they are open to anyone.",
    )
    security.add_argument(
        "--grant-keys",
        type=Path,
        help="a file of subscriber public keys (Z85, one per line) admitted as long as the adapter runs, "
        "besides the admin server's grants (benchmarks, closed deployments; needs --curve-key)",
    )
    security.add_argument(
        "--allow-fault-injection",
        action="store_true",
        help="accept the control commands that break things on purpose (drop, corrupt_state, penalty): "
        "drills and tests only",
    )
    security.add_argument(
        "--sync-key",
        type=Path,
        help="the group's CURVE key pair, the same file for every adapter of the channel: only its "
        "holders may speak on the sync bus. Without it the sync bus is open to anyone.",
    )
    security.add_argument(
        "--source-key",
        type=Path,
        help="the feed source's public key (FILE.pub of `feedha keys new FILE`): the source link is "
        "CURVE and only that source can feed this adapter, which presents its --curve-key to it",
    )
    security.add_argument(
        "--insecure",
        action="store_true",
        help="run without keys (or with some of them) off loopback, and reach --admin without TLS: "
        "refused otherwise. Keys are all or nothing: --curve-key, --sync-key and --source-key",
    )


def _journal_arguments(parser: argparse.ArgumentParser) -> None:
    journal = parser.add_argument_group("journal and replay")
    journal.add_argument(
        "--quarantine",
        type=Path,
        help="file for skipped source messages (JSON lines; default: quarantine.jsonl beside the journal)",
    )
    journal.add_argument(
        "--journal",
        type=Path,
        help="journal directory (one per adapter): everything published is journaled there, "
        "and a restart recovers numbering and conversion state from it",
    )
    journal.add_argument(
        "--fsync",
        choices=[policy.value for policy in FsyncPolicy],
        default=FsyncPolicy.BATCH.value,
        help="journal fsync policy (default: %(default)s)",
    )
    journal.add_argument(
        "--checkpoint-every",
        type=int,
        default=CHECKPOINT_EVERY,
        help="journal checkpoint every N messages (default: %(default)s)",
    )
    journal.add_argument(
        "--checkpoint-interval",
        type=float,
        default=CHECKPOINT_INTERVAL_S,
        help="... or every T seconds (default: %(default)s)",
    )
    journal.add_argument(
        "--replay", help="replay service endpoint to bind (needs --journal; announced with the line)"
    )
    journal.add_argument(
        "--retention-age", type=float, help="delete journal segments older than this many seconds"
    )
    journal.add_argument(
        "--retention-bytes", type=int, help="delete the oldest journal segments beyond this total size"
    )
    journal.add_argument(
        "--replay-max-bytes",
        type=int,
        default=REPLAY_MAX_BYTES,
        help="most packet bytes in one replay reply (default: %(default)s)",
    )


def _session_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("trading day and images (docs/architecture.md, docs/wire-format.md)")
    group.add_argument(
        "--session-end",
        metavar="HH:MM[:SS]",
        help="end the trading session every day at this local time (the active proposes it, the group "
        "agrees; daily volume, high, low, VWAP and trade count start again; default: only operators end it)",
    )
    group.add_argument(
        "--session-timezone",
        default="UTC",
        metavar="ZONE",
        help="IANA time zone of --session-end, e.g. America/New_York (default: %(default)s)",
    )
    group.add_argument(
        "--snapshot-line",
        metavar="ENDPOINT",
        help="publish the channel's image (every symbol's state at one msg_seq) here again and again "
        "(needs --journal; default: none; late joiners can also ask a replay service for it)",
    )
    group.add_argument(
        "--snapshot-interval",
        type=float,
        default=SNAPSHOT_INTERVAL_S,
        metavar="S",
        help="seconds between two images on --snapshot-line (default: %(default)s)",
    )


def _delayed_arguments(parser: argparse.ArgumentParser) -> None:
    delayed = parser.add_argument_group("delayed line and purges (docs/journal.md)")
    delayed.add_argument(
        "--delayed-line",
        metavar="ENDPOINT",
        help="bind the delayed line here (tcp://; needs --journal): every message again, --delay after "
        "it was published, for subscribers entitled to delayed data (default: none)",
    )
    delayed.add_argument(
        "--delay",
        type=float,
        default=DEFAULT_DELAY_S,
        metavar="SECONDS",
        help="the feed's delay: give every adapter of the feed the same (default: %(default)g, 15 minutes)",
    )
    delayed.add_argument(
        "--purge-margin",
        type=float,
        default=DEFAULT_MARGIN_S,
        metavar="SECONDS",
        help="a message can no longer be purged this long before the delayed line sends it "
        "(default: %(default)g)",
    )


def _conflated_arguments(parser: argparse.ArgumentParser) -> None:
    conflated = parser.add_argument_group("conflated line (docs/architecture.md, Conflated lines)")
    conflated.add_argument(
        "--conflate-line",
        metavar="ENDPOINT",
        help="bind the conflated line here: at the end of every --conflate-interval, the state of "
        "each symbol that changed in it, numbered alike on every adapter of the channel (default: none)",
    )
    conflated.add_argument(
        "--conflate-interval",
        type=float,
        default=DEFAULT_CONFLATE_INTERVAL_S,
        metavar="SECONDS",
        help="the conflated line's interval: give every adapter of the channel the same "
        f"({MIN_CONFLATE_INTERVAL_S:g}..{MAX_CONFLATE_INTERVAL_S:g}; default: %(default)g)",
    )


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


_CGROUP_FILES: Final = (
    Path("/sys/fs/cgroup/memory.max"),  # cgroup v2
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),  # cgroup v1
)


def read_container_limit(files: Sequence[Path] = _CGROUP_FILES) -> int | None:
    """This process's container memory limit from its cgroup (v2, then v1), or ``None``."""
    texts: list[str | None] = []
    for path in files:
        try:
            texts.append(path.read_text())
        except OSError:
            texts.append(None)
    return container_limit(*texts)


def memory_budget_of(args: argparse.Namespace, limit: int | None) -> tuple[int, str]:
    """The memory budget (``--memory-budget``, else from the container's ``limit``) and where it came from."""
    if args.memory_budget is not None:
        return args.memory_budget, "--memory-budget"
    if limit is None:
        return budget_from_limit(None), "no container limit"
    return budget_from_limit(limit), f"{MEMORY_HEADROOM:.0%} of the container's {format_size(limit)}"


def config_from_args(
    args: argparse.Namespace, *, admin_secret: str | None = None, container_memory: int | None = None
) -> AdapterConfig:
    """Build the adapter's configuration from parsed arguments (``container_memory``: its cgroup's limit)."""
    sync = SyncConfig(
        heartbeat_interval_s=args.heartbeat_interval,
        heartbeat_timeout_s=args.heartbeat_timeout,
        startup_grace_s=args.startup_grace,
        desync_limit=args.desync_limit,
        desync_window_s=args.desync_window,
    )
    return AdapterConfig(
        feed=args.feed,
        channel=args.channel,
        channel_number=args.channel_number,
        adapter=args.adapter,
        source_endpoint=args.source,
        source_stream=args.source_stream,
        source_stream_number=args.source_stream_number,
        line_endpoint=args.line,
        sync_endpoint=args.sync,
        peers=peer_endpoints(args.peer, adapter=args.adapter),
        control_endpoint=args.control,
        want_active=args.active or args.active_adapter == args.adapter,
        term=args.term,
        sync=sync,
        max_packet_bytes=args.max_packet_bytes,
        line_heartbeat_s=args.line_heartbeat,
        sndhwm=args.line_hwm,
        max_source_gap=args.max_source_gap,
        converter_table=args.converters,
        input_format=args.format,
        book_depth=args.book_depth,
        max_orders=args.max_orders,
        memory_budget=memory_budget_of(args, container_memory)[0],
        securities=args.securities,
        source_pump=args.source_pump,
        health_penalty=args.health_penalty,
        **_admin_and_keys(args, admin_secret),
        replay_endpoint=args.replay,
        journal_dir=args.journal,
        journal_fsync=FsyncPolicy(args.fsync),
        checkpoint_every=args.checkpoint_every,
        checkpoint_interval_s=args.checkpoint_interval,
        replay_max_bytes=args.replay_max_bytes,
        retention_max_age_s=args.retention_age,
        retention_max_bytes=args.retention_bytes,
        quarantine_file=args.quarantine,
        health_address=None if args.health is None else parse_address(args.health, option="--health"),
        fault_injection=args.allow_fault_injection,
        metrics_address=None if args.metrics is None else parse_address(args.metrics),
        session_schedule=None
        if args.session_end is None
        else SessionSchedule.parse(args.session_end, args.session_timezone),
        snapshot_endpoint=args.snapshot_line,
        snapshot_interval_s=args.snapshot_interval,
        delayed_line_endpoint=args.delayed_line,
        delay_s=args.delay,
        purge_margin_s=args.purge_margin,
        conflate_line_endpoint=args.conflate_line,
        conflate_interval_s=args.conflate_interval,
    )


def _admin_and_keys(args: argparse.Namespace, admin_secret: str | None) -> dict[str, Any]:
    # The admin server's address and credentials, and the data plane's keys.
    return {
        "admin": args.admin,
        "admin_credentials": (args.admin_key_id, admin_secret or "") if args.admin_key_id else None,
        "admin_tls_ca": args.admin_tls_ca,
        "admin_tls_cert": args.admin_tls_cert,
        "admin_tls_key": args.admin_tls_key,
        "curve_key": args.curve_key,
        "sync_key": args.sync_key,
        "source_key": args.source_key,
        "grant_keys": args.grant_keys,
        "insecure": args.insecure,
    }


def peer_endpoints(values: Sequence[str], *, adapter: int) -> tuple[str, ...]:
    """The peers' sync endpoints from ``--peer`` values: ``N=ENDPOINT`` for adapter ``adapter`` is skipped.

    Args:
        values: ``ENDPOINT`` or ``N=ENDPOINT`` items.
        adapter: this adapter's number.
    """
    peers = []
    for value in values:
        number, sep, endpoint = value.partition("=")
        if sep and number.isdigit():
            if int(number) == adapter:
                continue
            value = endpoint
        peers.append(value)
    return tuple(peers)


# Options no inherited environment variable may set: drill-only switches.
# --insecure too: it must be asked for on the command line, never inherited.
_NO_ENV = frozenset({"allow_fault_injection", "health_penalty", "insecure"})


logger = logging.getLogger(__name__)


def _print_status(event: dict[str, Any]) -> None:
    print(json.dumps(event), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``feedha adapter``."""
    args = settings.parse(build_parser(), argv, no_env=_NO_ENV).args
    logs.configure_from(args)
    limit = read_container_limit()
    try:
        config = config_from_args(
            args, admin_secret=os.environ.get("FEEDHA_ADAPTER_SECRET"), container_memory=limit
        )
    except (AdapterError, ValueError) as exc:  # ValueError: a malformed --metrics address
        print(f"feedha adapter: {exc}", file=sys.stderr)
        return 2
    budget, origin = memory_budget_of(args, limit)
    logger.info(
        "memory budget %s (%s): the conversion tables may count %s",
        format_size(budget), origin, format_size(config.table_budget),
    )  # fmt: skip
    try:
        from feedha.adapter.runner import AdapterRunner

        runner = AdapterRunner(config, on_status=_print_status)
    except AdapterError as exc:
        print(f"feedha adapter: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        runner.run(stop, settle=True)
    except (TransportConfigError, AdapterError) as exc:  # e.g. epgm:// without OpenPGM, a TLS file
        print(f"feedha adapter: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
