"""``feedha adapter``'s options, in groups as ``--help`` shows them (the run: ``feedha.adapter.__main__``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from feedha import settings
from feedha.adapter.config import LINE_SNDHWM, REPLAY_MAX_BYTES, SNAPSHOT_INTERVAL_S
from feedha.adapter.conversion.budget import MEMORY_HEADROOM, parse_size
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
from feedha.adapter.formats.interface import MAX_ORDERS
from feedha.adapter.formats.registry import DEFAULT_FORMAT, FORMATS
from feedha.adapter.journal.config import FsyncPolicy
from feedha.admin_client.channel import add_tls_arguments
from feedha.proto.wire import DEFAULT_MAX_PACKET_BYTES


def build_parser() -> argparse.ArgumentParser:
    """The ``feedha adapter`` argument parser (every option also a config key and a FEEDHA_ variable)."""
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
    _timing_arguments(tune)
    _conversion_arguments(tune)
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


def _timing_arguments(tune: argparse._ActionsContainer) -> None:
    # The sync bus's and the line's clocks and bounds (the same on every adapter of a group).
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


def _conversion_arguments(tune: argparse._ActionsContainer) -> None:
    # What the source speaks and what its conversion may hold.
    tune.add_argument("--converters", type=Path, help="converter table YAML (default: the packaged one)")
    tune.add_argument(
        "--format",
        choices=sorted(FORMATS),
        default=DEFAULT_FORMAT,
        help="the source stream's input format (default: %(default)s; docs/converters.md): "
        + "; ".join(f"{each.name}, {each.summary}" for each in FORMATS.values()),
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
