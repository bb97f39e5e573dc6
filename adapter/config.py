"""The feed adapter's configuration: one frozen dataclass, checked once."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from feedha.adapter.conversion.budget import DEFAULT_MEMORY_BUDGET, table_bytes
from feedha.adapter.core.config import (
    CHECKPOINT_EVERY,
    CHECKPOINT_INTERVAL_S,
    DEFAULT_CONFLATE_INTERVAL_S,
    LINE_HEARTBEAT_S,
    MAX_CONFLATE_INTERVAL_S,
    MAX_SOURCE_GAP,
    MIN_CONFLATE_INTERVAL_S,
    CoreConfig,
)
from feedha.adapter.core.delayed import DEFAULT_DELAY_S, DEFAULT_MARGIN_S
from feedha.adapter.core.session import SessionSchedule
from feedha.adapter.core.sync_types import SyncConfig
from feedha.adapter.errors import ConfigError
from feedha.adapter.formats.interface import MAX_BOOK_DEPTH, MAX_ORDERS
from feedha.adapter.formats.registry import DEFAULT_FORMAT, FORMATS, option_problems
from feedha.adapter.journal.config import FsyncPolicy
from feedha.proto.wire import DEFAULT_MAX_PACKET_BYTES
from feedha.transport.locality import is_local_endpoint, is_loopback_target

SOURCE_BATCH_FRAMES: Final = 64
# Every queue is bounded (a PUB drops silently at its high-water mark, per subscriber):
LINE_SNDHWM: Final = 4096  # packets queued per line subscriber (~1-4 s at full rate); then its own drops
# Source frames waiting. Small on purpose: a source of ours waits for its slowest adapter
# (feedha.transport.backpressure), and libzmq resumes a full queue only once half of it is read,
# so a queue of 20,000 frames (~700,000 ITCH messages) answered back-pressure every few seconds.
SOURCE_RCVHWM: Final = 128
SYNC_HWM: Final = 10_000  # sync-bus messages queued either way
SOURCE_MAX_FRAME_BYTES: Final = 16 * 1024 * 1024  # a larger source frame drops the connection
SYNC_MAX_MESSAGE_BYTES: Final = 64 * 1024 * 1024  # room for a snapshot of a large conversion state
CONTROL_MAX_REQUEST_BYTES: Final = 64 * 1024
SOURCE_BUDGET_S: Final = 0.005  # longest stretch of source work between looks at the sync bus
REPLAY_MAX_BYTES: Final = 1024 * 1024  # bound on one replay reply (packets, headers included)
SNAPSHOT_INTERVAL_S: Final = 1.0  # the snapshot loop publishes the image this often
MIN_SNAPSHOT_INTERVAL_S: Final = 0.05
_LOCAL_CONTROL: Final = ("ipc://", "inproc://", "tcp://127.0.0.1:", "tcp://localhost:", "tcp://[::1]:")
_TRANSPORTS: Final = ("tcp://", "ipc://", "inproc://", "epgm://", "pgm://", "norm://")


@dataclass(frozen=True, slots=True, kw_only=True)
class AdapterConfig:
    """Everything one adapter process needs.

    Attributes:
        feed: the market-data product, e.g. ``EQUITIES``.
        channel: the channel name (the topic of every line packet).
        channel_number: the channel number in packet headers (u16).
        adapter: this adapter's number (u16, unique in the channel).
        source_endpoint: the feed source's PUB endpoint for our source stream (we connect).
        source_stream: the source stream's name (its topic), e.g. ``A-M``.
        source_stream_number: its number in block headers (u16).
        line_endpoint: where we bind our line's PUB socket; the URL picks the transport.
        sync_endpoint: where we bind our sync-bus PUB socket.
        peers: the sync endpoints of the other adapters of the channel (we connect).
        control_endpoint: optional REP socket for operators, drills and tests (JSON commands).
        want_active: start as the active unless an active is heard during the start-up grace.
        term: the term to start from (a restarted adapter passes the last it knew).
        sync: timers and limits of the sync rules.
        max_packet_bytes: packet budget, header included.
        line_heartbeat_s: idle time after which the line sends a heartbeat packet.
        sndhwm: the line's high-water mark, in packets per subscriber: a subscriber that
            stops reading loses packets on its own connection past it (it recovers them from
            a replay service) and never grows the adapter; 0 means unbounded (tests only).
        converter_table: YAML converter table; None uses the packaged default (``feedha-fix`` only).
        input_format: the source stream's input format, a name in ``adapter.formats.registry.FORMATS``
            (docs/converters.md).
        book_depth: order-book levels shown per side (``fix44``, ``itch50``).
        max_orders: ``itch50``: the most live orders held; an add past it is quarantined
            (``order_limit``), so a flood of adds cannot grow the adapter. Every adapter of a
            channel must hold the same limit (as the same book depth).
        memory_budget: the bytes this adapter may use (the entry point's default: 75% of its
            container's limit, else 768 MiB); its conversion tables count theirs against it less
            the adapter's base and refuse a message that would pass it (``memory_limit``;
            adapter.conversion.budget). A backup runs with its active's tables' budget when it
            can hold it, and fails itself when it cannot.
        securities: ``fix44``'s security table (YAML: SecurityID or ``22:48`` -> symbol), or None.
        health_penalty: handicap subtracted from the health score (drills, tests).
        admin: the admin server's ``host:port`` to register with; None runs unregistered.
        admin_credentials: ``(key_id, secret)`` of a user with the adapter role.
        admin_tls_ca: PEM CA that verifies the admin server: the link uses TLS (None: plaintext).
        admin_tls_cert: PEM client certificate for an admin server that requires one (with ``admin_tls_key``).
        admin_tls_key: the client certificate's private key.
        replay_endpoint: where the replay service binds (announced with the line);
            needs ``journal_dir``, which it serves from.
        journal_dir: the journal directory (one per adapter); None runs without a journal.
        journal_fsync: the journal's fsync policy.
        checkpoint_every: write a checkpoint after this many journaled messages ...
        checkpoint_interval_s: ... or this many seconds after the last one.
        replay_max_bytes: the most packet bytes one replay reply carries.
        retention_max_age_s: after each checkpoint, delete journal segments older than this (None: keep).
        retention_max_bytes: ... and the oldest segments while the journal is larger than this (None: keep).
        max_source_gap: a source_seq further past the last one than this is held until
            confirmed (see ``CoreConfig.max_source_gap``).
        curve_key: this adapter's CURVE key pair (secret file): its line and replay service then
            accept only the subscriber keys the admin server grants (None: open to anyone).
        grant_keys: a file of subscriber public keys (Z85, one per line) admitted for as long as the
            adapter runs, besides what the admin server grants (benchmarks, closed deployments).
        sync_key: the group's CURVE key pair, shared by the adapters of the channel: only holders
            may speak on the sync bus (None: an open sync bus).
        source_key: the feed source's public key (a ``.pub`` file): the source link is CURVE, the
            source verified by that key, the adapter presenting its ``curve_key`` (None: plain).
        insecure: run without keys (or with some only) on an address other than loopback, and reach
            the admin server without TLS off loopback. Without it such setups are refused: keys are
            all-or-nothing (``curve_key``, ``sync_key`` and ``source_key`` together), and without them
            every endpoint must be loopback, ``ipc://`` or ``inproc://``.
        health_address: ``(host, port)`` where ``/healthz`` and ``/readyz`` alone are served, on a
            listener of their own (probes never wait behind scrapes; None: on ``metrics_address``).
        fault_injection: accept the control commands that break things on purpose (drills, tests).
        quarantine_file: where skipped source messages are kept (None: beside the journal,
            ``quarantine.jsonl``, or nowhere without a journal -- they are still counted and logged).
        metrics_address: ``(host, port)`` where ``/metrics``, ``/healthz`` and ``/readyz`` are
            served over HTTP (None: not served; port 0 picks one).
        session_schedule: the daily end of the trading session (None: only operators end it).
        snapshot_endpoint: where the snapshot loop publishes the channel's image (needs
            ``journal_dir``; None: no snapshot loop).
        snapshot_interval_s: how often the snapshot loop publishes it.
        delayed_line_endpoint: where the delayed line's PUB socket binds (None: no delayed
            line); served from the journal, so it needs ``journal_dir``. ``tcp://`` or ``ipc://``:
            CURVE keeps delayed-only keys off the real-time line, which a multicast line cannot.
        delay_s: how long after its publish time a message goes out on the delayed line (the
            feed's setting: every adapter of its channels takes the same value).
        purge_margin_s: a message stops being purgeable this long before it is due.
        conflate_line_endpoint: where the conflated line's PUB socket binds (None: no
            conflated line; the adapter still takes part in the group's interval protocol).
        conflate_interval_s: the conflated line's interval (the feed's setting: every adapter
            of a channel takes the same value).
        source_pump: let the source pump (``adapter/_pump.c``) take an adapter's common turn
            where it can run (``False``: every frame through the Python loop; A/B runs, diagnosis).
    """

    feed: str = "EQUITIES"
    channel: str
    channel_number: int
    adapter: int
    source_endpoint: str
    source_stream: str
    source_stream_number: int
    line_endpoint: str
    sync_endpoint: str
    peers: tuple[str, ...] = ()
    control_endpoint: str | None = None
    want_active: bool = False
    term: int = 0
    sync: SyncConfig = field(default_factory=SyncConfig)
    max_packet_bytes: int = DEFAULT_MAX_PACKET_BYTES
    line_heartbeat_s: float = LINE_HEARTBEAT_S
    sndhwm: int = LINE_SNDHWM
    converter_table: Path | None = None
    input_format: str = DEFAULT_FORMAT
    book_depth: int = 10
    max_orders: int = MAX_ORDERS
    memory_budget: int = DEFAULT_MEMORY_BUDGET
    securities: Path | None = None
    health_penalty: float = 0.0
    admin: str | None = None
    admin_credentials: tuple[str, str] | None = None
    admin_tls_ca: Path | None = None
    admin_tls_cert: Path | None = None
    admin_tls_key: Path | None = None
    replay_endpoint: str | None = None
    journal_dir: Path | None = None
    journal_fsync: FsyncPolicy = FsyncPolicy.BATCH
    checkpoint_every: int = CHECKPOINT_EVERY
    checkpoint_interval_s: float = CHECKPOINT_INTERVAL_S
    replay_max_bytes: int = REPLAY_MAX_BYTES
    retention_max_age_s: float | None = None
    retention_max_bytes: int | None = None
    quarantine_file: Path | None = None
    curve_key: Path | None = None
    sync_key: Path | None = None
    source_key: Path | None = None
    insecure: bool = False
    health_address: tuple[str, int] | None = None
    grant_keys: Path | None = None
    fault_injection: bool = False
    max_source_gap: int = MAX_SOURCE_GAP
    metrics_address: tuple[str, int] | None = None
    session_schedule: SessionSchedule | None = None
    snapshot_endpoint: str | None = None
    snapshot_interval_s: float = SNAPSHOT_INTERVAL_S
    delayed_line_endpoint: str | None = None
    delay_s: float = DEFAULT_DELAY_S
    purge_margin_s: float = DEFAULT_MARGIN_S
    conflate_line_endpoint: str | None = None
    conflate_interval_s: float = DEFAULT_CONFLATE_INTERVAL_S
    source_pump: bool = True

    @property
    def adapter_id(self) -> str:
        """The adapter's name in the admin server's registry, e.g. ``EQ-A-M.2``."""
        return f"{self.channel}.{self.adapter}"

    @property
    def quarantine_path(self) -> Path | None:
        """The quarantine file in use (see ``quarantine_file``)."""
        if self.quarantine_file is not None:
            return self.quarantine_file
        return None if self.journal_dir is None else self.journal_dir / "quarantine.jsonl"

    def core(self) -> CoreConfig:
        """The part of the configuration the adapter core decides with."""
        return CoreConfig(
            channel_number=self.channel_number,
            adapter=self.adapter,
            source_stream_number=self.source_stream_number,
            want_active=self.want_active,
            term=self.term,
            sync=self.sync,
            max_packet_bytes=self.max_packet_bytes,
            line_heartbeat_s=self.line_heartbeat_s,
            health_penalty=self.health_penalty,
            journal=self.journal_dir is not None,
            checkpoint_every=self.checkpoint_every,
            checkpoint_interval_s=self.checkpoint_interval_s,
            max_source_gap=self.max_source_gap,
            fault_injection=self.fault_injection,
            group_size=len(self.peers) + 1,
            session_schedule=self.session_schedule,
            delay_s=self.delay_s if self.delayed_line_endpoint else None,
            purge_margin_s=self.purge_margin_s,
            conflate_interval_s=self.conflate_interval_s if self.conflate_line_endpoint else None,
            table_budget=self.table_budget,
        )

    @property
    def table_budget(self) -> int:
        """The bytes the conversion tables may count: the memory budget less the adapter's base."""
        return table_bytes(self.memory_budget)

    def __post_init__(self) -> None:
        try:
            table_bytes(self.memory_budget)
        except ValueError as exc:
            raise ConfigError(f"memory_budget: {exc}") from exc
        self.core()  # checks identity, numbering and timers (raises ConfigError)
        interval = self.conflate_interval_s
        if not MIN_CONFLATE_INTERVAL_S <= interval <= MAX_CONFLATE_INTERVAL_S:
            raise ConfigError(
                f"conflate_interval_s must be in {MIN_CONFLATE_INTERVAL_S:g}..{MAX_CONFLATE_INTERVAL_S:g} "
                f"seconds, got {interval!r}"
            )
        if self.input_format not in FORMATS:
            raise ConfigError(f"input_format must be one of {sorted(FORMATS)}, got {self.input_format!r}")
        if not 1 <= self.book_depth <= MAX_BOOK_DEPTH:
            raise ConfigError(f"book_depth must be in 1..{MAX_BOOK_DEPTH}, got {self.book_depth}")
        if self.max_orders < 1:
            raise ConfigError(f"max_orders must be at least 1, got {self.max_orders}")
        given = [name for name in ("securities", "converter_table") if getattr(self, name) is not None]
        for problem in option_problems(self.input_format, given):
            raise ConfigError(problem)
        if not self.channel or any(c.isspace() for c in self.channel):
            raise ConfigError(f"channel must be a non-empty name without whitespace, got {self.channel!r}")
        if self.sndhwm < 0:
            raise ConfigError(f"sndhwm must be >= 0, got {self.sndhwm}")
        self._check_endpoints()
        self._check_keys()
        self._check_served_from_journal()
        if not self.snapshot_interval_s >= MIN_SNAPSHOT_INTERVAL_S:
            raise ConfigError(
                f"snapshot_interval_s must be >= {MIN_SNAPSHOT_INTERVAL_S}, got {self.snapshot_interval_s!r}"
            )
        if self.replay_max_bytes < self.max_packet_bytes:
            raise ConfigError(
                f"replay_max_bytes ({self.replay_max_bytes}) must hold one packet ({self.max_packet_bytes})"
            )
        if not self.insecure:
            self._check_secure()

    def _check_endpoints(self) -> None:
        for name in ("source_endpoint", "line_endpoint", "sync_endpoint"):
            _check_endpoint(name, getattr(self, name))
        for peer in self.peers:
            _check_endpoint("peers", peer)
        for name in (
            "control_endpoint",
            "replay_endpoint",
            "snapshot_endpoint",
            "delayed_line_endpoint",
            "conflate_line_endpoint",
        ):
            if getattr(self, name) is not None:
                _check_endpoint(name, getattr(self, name))
        if self.control_endpoint is not None and not self.control_endpoint.startswith(_LOCAL_CONTROL):
            raise ConfigError(
                f"control_endpoint {self.control_endpoint!r} must be local (ipc://, or tcp:// on "
                "127.0.0.1 or [::1]): it takes commands without authentication; operators go through "
                "the admin server"
            )
        if self.snapshot_endpoint is not None and self.snapshot_endpoint.startswith(
            ("epgm://", "pgm://", "norm://")
        ):
            raise ConfigError("snapshot_endpoint must be tcp:// or ipc:// (its parts are not sealed)")
        delayed = self.delayed_line_endpoint
        if delayed is not None and not delayed.startswith(("tcp://", "ipc://", "inproc://")):
            raise ConfigError(
                f"delayed_line_endpoint {delayed!r} must be tcp:// (or ipc://): only "
                "CURVE keeps delayed-only subscribers off the real-time stream, and it does not cover "
                "multicast"
            )

    def _check_keys(self) -> None:
        if self.curve_key is not None and self.admin is None and self.grant_keys is None:
            raise ConfigError(
                "curve_key needs an admin server (--admin) to grant the subscribers' keys, or --grant-keys"
            )
        if (self.admin_tls_cert is None) != (self.admin_tls_key is None):
            raise ConfigError("admin_tls_cert and admin_tls_key must be given together")
        if self.admin is None and (self.admin_tls_ca or self.admin_tls_cert):
            raise ConfigError("admin_tls_ca/admin_tls_cert need an admin server (--admin)")
        if self.grant_keys is not None and self.curve_key is None:
            raise ConfigError("grant_keys needs curve_key: without CURVE the line is open to anyone anyway")

    def _check_served_from_journal(self) -> None:
        # The replay service, the snapshot line and the delayed line all read the journal.
        if self.journal_dir is not None:
            return
        if self.replay_endpoint is not None:
            raise ConfigError(f"replay_endpoint {self.replay_endpoint!r} needs a journal_dir to serve from")
        if self.snapshot_endpoint is not None:
            raise ConfigError(
                f"snapshot_endpoint {self.snapshot_endpoint!r} needs a journal_dir to build from"
            )
        if self.delayed_line_endpoint is not None:
            raise ConfigError(
                "a delayed line is served from the journal: delayed_line_endpoint needs journal_dir"
            )

    @property
    def endpoints(self) -> tuple[tuple[str, str], ...]:
        """``(option, endpoint)`` of every socket the adapter binds or connects on the data plane."""
        named = [
            ("line", self.line_endpoint),
            ("sync", self.sync_endpoint),
            ("source", self.source_endpoint),
            ("replay", self.replay_endpoint),
            ("snapshot_line", self.snapshot_endpoint),
            ("delayed_line", self.delayed_line_endpoint),
            ("conflate_line", self.conflate_line_endpoint),
        ]
        named += [("peer", peer) for peer in self.peers]
        return tuple((name, endpoint) for name, endpoint in named if endpoint)

    def _check_secure(self) -> None:
        # Secure unless told otherwise (docs/security.md, "Default posture").
        given = {"curve_key": self.curve_key, "sync_key": self.sync_key, "source_key": self.source_key}
        have = sorted(name for name, path in given.items() if path is not None)
        if have and len(have) != len(given):
            missing = sorted(set(given) - set(have))
            raise ConfigError(
                f"partial key setup: {', '.join(have)} without {', '.join(missing)} would leave "
                f"{_LEFT_OPEN[missing[0]]} open; give --curve-key, --sync-key and --source-key together "
                "(or --insecure)"
            )
        if not have:
            exposed = [
                f"{name} {endpoint}" for name, endpoint in self.endpoints if not is_local_endpoint(endpoint)
            ]
            if exposed:
                raise ConfigError(
                    f"refusing to run without keys off loopback ({', '.join(exposed)}): give --curve-key, "
                    "--sync-key and --source-key, or --insecure"
                )
        if self.admin is not None and self.admin_tls_ca is None and not is_loopback_target(self.admin):
            raise ConfigError(
                f"refusing plaintext gRPC to the admin server {self.admin!r} off loopback: give "
                "--admin-tls-ca, or --insecure"
            )


_LEFT_OPEN: Final = {
    "curve_key": "the line and replay service",
    "sync_key": "the sync bus",
    "source_key": "the source link",
}


def _check_endpoint(name: str, endpoint: str) -> None:
    if not endpoint.startswith(_TRANSPORTS):
        raise ConfigError(f"{name}: endpoint {endpoint!r} must start with one of {', '.join(_TRANSPORTS)}")
