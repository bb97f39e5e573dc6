"""``feedha adapter``: run one feed adapter (flags, config file, environment -> AdapterConfig -> runner).

Every option is also a key of the ``--config`` YAML file and a ``FEEDHA_*``
variable (``feedha.settings``); the secret of ``--admin-key-id`` is read from
``$FEEDHA_ADAPTER_SECRET`` only. So every adapter of a group can share one
config file, with what differs per adapter (``adapter``, ``line``, ``replay``,
``curve_key``) in its environment: ``peer: ["1=tcp://...", "2=tcp://..."]``
names every member's sync endpoint by number and each adapter skips its own,
and ``active_adapter: 1`` says which one starts as the active. The options
themselves are declared in ``feedha.adapter.arguments``.
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
from feedha.adapter.arguments import build_parser
from feedha.adapter.config import AdapterConfig
from feedha.adapter.conversion.budget import (
    MEMORY_HEADROOM,
    budget_from_limit,
    container_limit,
    format_size,
)
from feedha.adapter.core.session import SessionSchedule
from feedha.adapter.core.sync import SyncConfig
from feedha.adapter.errors import AdapterError
from feedha.adapter.journal.config import FsyncPolicy
from feedha.transport.errors import TransportConfigError
from feedha.transport.http import parse_address

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
    return AdapterConfig(
        **_identity_and_endpoints(args),
        **_timing(args),
        **_conversion(args, container_memory),
        **_admin_and_keys(args, admin_secret),
        **_journal(args),
        **_other_lines(args),
        health_address=None if args.health is None else parse_address(args.health, option="--health"),
        metrics_address=None if args.metrics is None else parse_address(args.metrics),
    )


def _identity_and_endpoints(args: argparse.Namespace) -> dict[str, Any]:
    # Who this adapter is in its group, and the sockets it binds and connects.
    return {
        "feed": args.feed,
        "channel": args.channel,
        "channel_number": args.channel_number,
        "adapter": args.adapter,
        "source_endpoint": args.source,
        "source_stream": args.source_stream,
        "source_stream_number": args.source_stream_number,
        "line_endpoint": args.line,
        "sync_endpoint": args.sync,
        "peers": peer_endpoints(args.peer, adapter=args.adapter),
        "control_endpoint": args.control,
        "want_active": args.active or args.active_adapter == args.adapter,
        "term": args.term,
    }


def _timing(args: argparse.Namespace) -> dict[str, Any]:
    # The sync bus's and the line's clocks and bounds.
    sync = SyncConfig(
        heartbeat_interval_s=args.heartbeat_interval,
        heartbeat_timeout_s=args.heartbeat_timeout,
        startup_grace_s=args.startup_grace,
        desync_limit=args.desync_limit,
        desync_window_s=args.desync_window,
    )
    return {
        "sync": sync,
        "max_packet_bytes": args.max_packet_bytes,
        "line_heartbeat_s": args.line_heartbeat,
        "sndhwm": args.line_hwm,
        "max_source_gap": args.max_source_gap,
        "health_penalty": args.health_penalty,
        "fault_injection": args.allow_fault_injection,
    }


def _conversion(args: argparse.Namespace, container_memory: int | None) -> dict[str, Any]:
    # What the source speaks, what its conversion may hold, and where it runs.
    return {
        "converter_table": args.converters,
        "input_format": args.format,
        "book_depth": args.book_depth,
        "max_orders": args.max_orders,
        "memory_budget": memory_budget_of(args, container_memory)[0],
        "securities": args.securities,
        "source_pump": args.source_pump,
    }


def _journal(args: argparse.Namespace) -> dict[str, Any]:
    # The journal, its checkpoints and retention, the replay service and the quarantine.
    return {
        "replay_endpoint": args.replay,
        "journal_dir": args.journal,
        "journal_fsync": FsyncPolicy(args.fsync),
        "checkpoint_every": args.checkpoint_every,
        "checkpoint_interval_s": args.checkpoint_interval,
        "replay_max_bytes": args.replay_max_bytes,
        "retention_max_age_s": args.retention_age,
        "retention_max_bytes": args.retention_bytes,
        "quarantine_file": args.quarantine,
    }


def _other_lines(args: argparse.Namespace) -> dict[str, Any]:
    # The trading day, and the lines besides the real-time one: images, delayed, conflated.
    return {
        "session_schedule": None
        if args.session_end is None
        else SessionSchedule.parse(args.session_end, args.session_timezone),
        "snapshot_endpoint": args.snapshot_line,
        "snapshot_interval_s": args.snapshot_interval,
        "delayed_line_endpoint": args.delayed_line,
        "delay_s": args.delay,
        "purge_margin_s": args.purge_margin,
        "conflate_line_endpoint": args.conflate_line,
        "conflate_interval_s": args.conflate_interval,
    }


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
