"""The adapter's Prometheus metrics and health checks, served over HTTP (``--metrics HOST:PORT``).

Theory of operation
-------------------
The adapter's state lives on its loop thread and is never locked. So the
loop *publishes* it: every :data:`SAMPLE_S` the runner calls
:meth:`AdapterMetrics.observe`, which reads the core's status (what
``status()`` and the core's sync state already report), folds what must be
accumulated between samples (desync episodes, time spent throttled) and
stores one immutable :class:`Sample` by a single attribute store. The HTTP
thread (:class:`~feedha.transport.http_thread.HttpThread`) builds the metrics from
the newest sample when scraped, and the health checks read its age: a loop
that stopped turning stops publishing, and ``/healthz`` fails.

Throttled time is counted at the sampling resolution (a throttle shorter
than one interval may be missed or counted as one interval); desync episodes
are exact as long as a sample comes within the sync rules' desync window.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from feedha.adapter.config import AdapterConfig
from feedha.adapter.core.sync_types import Role, SyncState, SyncStatus
from feedha.transport.health import PROBE_LIMITS, health_routes, probe_routes
from feedha.transport.http_thread import HttpThread

logger = logging.getLogger(__name__)

SAMPLE_S: Final = 0.1  # the runner samples with its machine figures
STALL_S: Final = 5.0  # no sample for this long: the loop is stuck, /healthz fails
_ERROR_KINDS: Final = ("malformed_frames", "malformed_messages", "conversion_errors", "internal_errors")


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """What the loop published at one moment (read by the HTTP thread)."""

    at: float
    status: Mapping[str, Any]
    is_publishing: bool
    lag: int
    desync_episodes: int
    throttled_s: float
    line_bytes: int
    sync_counts: tuple[int, ...] = ()
    sync_total_s: float = 0.0
    sync_bounds: tuple[float, ...] = field(default=())


class AdapterMetrics(Collector):
    """The adapter's collector, registry and HTTP endpoint.

    Args:
        config: the adapter's configuration (labels, and where to serve).
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(self, config: AdapterConfig, *, clock: Any = time.monotonic) -> None:
        self._labels = {"channel": config.channel, "adapter": str(config.adapter)}
        self._line = config.line_endpoint
        self._clock = clock
        self._started = clock()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        ProcessCollector(
            registry=self.registry
        )  # process_cpu_seconds_total, process_resident_memory_bytes ...
        self.sample: Sample | None = None
        self._episodes = 0
        self._last_desync = float("-inf")
        self._throttled_s = 0.0
        self._address = config.metrics_address
        self._health_address = config.health_address
        self._http: HttpThread | None = None
        self._health: HttpThread | None = None
        self.health_address: str | None = None  # where the probes' own listener is, once serving

    def __repr__(self) -> str:
        age = None if self.sample is None else round(self._clock() - self.sample.at, 3)
        return f"<AdapterMetrics [{self._labels['channel']}.{self._labels['adapter']}, sample_age={age}]>"

    # ---- the loop thread -------------------------------------------------------------

    def observe(
        self,
        now: float,
        *,
        status: Callable[[], dict[str, Any]],
        sync: SyncState,
        lag: Callable[[], int],
        line_bytes: int,
        sync_times: Any = None,
    ) -> None:
        """Publish a sample of the adapter's state (on the loop thread; a no-op when not served).

        Args:
            now: the monotonic clock.
            status: builds the adapter's status (called only when metrics are served).
            sync: the sync rules' state (frozen).
            lag: source messages behind the active (called only when metrics are served).
            line_bytes: packet bytes handed to the line so far.
            sync_times: the journal writer's fsync histogram (``None``: no journal).
        """
        if not self.is_sampling:
            return
        new = [t for t in sync.desyncs if t > self._last_desync]
        if new:
            self._episodes += len(new)
            self._last_desync = max(new)
        previous = self.sample
        if previous is not None and previous.status.get("throttled"):
            self._throttled_s += max(0.0, now - previous.at)
        times = sync_times
        self.sample = Sample(
            at=now,
            status=status(),
            is_publishing=sync.is_publishing,
            lag=lag(),
            desync_episodes=self._episodes,
            throttled_s=self._throttled_s,
            line_bytes=line_bytes,
            sync_counts=() if times is None else tuple(times.counts),
            sync_total_s=0.0 if times is None else times.total_s,
            sync_bounds=() if times is None else times.bounds,
        )

    # ---- serving ---------------------------------------------------------------------

    def serve(self) -> str | None:
        """Start the HTTP endpoint if an address is configured; returns its ``host:port``.

        Raises:
            OSError: the address cannot be bound.
        """
        if self._health_address is not None:
            host, port = self._health_address
            self._health = HttpThread(
                probe_routes(alive=self.alive, ready=self.ready), host=host, port=port, limits=PROBE_LIMITS
            )
            self.health_address = _address(host, self._health.start())
        if self._address is None:
            return None
        host, port = self._address
        routes = health_routes(registry=self.registry, alive=self.alive, ready=self.ready)
        self._http = HttpThread(routes, host=host, port=port)
        return _address(host, self._http.start())

    def close(self) -> None:
        """Stop the HTTP endpoints (idempotent)."""
        for http in (self._http, self._health):
            if http is not None:
                http.stop()
        self._http = self._health = None

    @property
    def is_sampling(self) -> bool:
        """Whether anything reads the samples (metrics or probes are served)."""
        return self._address is not None or self._health_address is not None

    def alive(self) -> tuple[bool, str]:
        """Liveness: the loop publishes samples (before the first: starting, e.g. recovering)."""
        sample = self.sample
        if sample is None:
            return True, f"starting for {self._clock() - self._started:.1f} s"
        age = self._clock() - sample.at
        if age > STALL_S:
            return False, f"the adapter loop has not turned for {age:.1f} s"
        return True, f"loop turning ({age * 1000:.0f} ms ago)"

    def ready(self) -> tuple[bool, str]:
        """Readiness: the adapter publishes its line (the active, or a backup in sync)."""
        sample = self.sample
        alive, reason = self.alive()
        if sample is None or not alive:
            return False, reason if sample is not None else "starting"
        status = sample.status
        what = f"{status.get('role')} term {status.get('term')}, {status.get('status')}"
        if sample.is_publishing:
            return True, f"{what}, publishing"
        return False, f"{what}, not publishing"

    # ---- the HTTP thread -------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        """The metrics of the newest sample (none before the first)."""
        sample = self.sample
        if sample is None:
            return
        yield from _state_metrics(sample, self._labels)
        yield from _line_metrics(sample, self._labels, self._line)
        yield from _source_metrics(sample, self._labels)
        yield from _journal_metrics(sample, self._labels)


def _gauge(name: str, doc: str, labels: Mapping[str, str], value: float, **extra: str) -> Metric:
    family = GaugeMetricFamily(name, doc, labels=[*labels, *extra])
    family.add_metric([*labels.values(), *extra.values()], value)
    return family


def _counter(name: str, doc: str, labels: Mapping[str, str], value: float, **extra: str) -> Metric:
    family = CounterMetricFamily(name, doc, labels=[*labels, *extra])
    family.add_metric([*labels.values(), *extra.values()], value)
    return family


def _state_metrics(sample: Sample, labels: Mapping[str, str]) -> Iterator[Metric]:
    status = sample.status
    role = GaugeMetricFamily(
        "feedha_adapter_role", "1 for the adapter's current role", labels=[*labels, "role"]
    )
    for value in Role:
        role.add_metric([*labels.values(), value.value], float(status.get("role") == value.value))
    yield role
    sync = GaugeMetricFamily(
        "feedha_adapter_sync_status", "1 for the current sync status", labels=[*labels, "status"]
    )
    for verdict in SyncStatus:
        sync.add_metric([*labels.values(), verdict.value], float(status.get("status") == verdict.value))
    yield sync
    yield _gauge("feedha_adapter_term", "the adapter's term (fencing number)", labels, status.get("term", 0))
    yield _gauge(
        "feedha_adapter_publishing", "1 while the line publishes", labels, float(sample.is_publishing)
    )
    yield _gauge("feedha_adapter_next_msg_seq", "msg_seq of the next message", labels, status["next_msg_seq"])
    yield _gauge("feedha_adapter_health_score", "health score, 0..100", labels, status.get("health", 0.0))
    yield _gauge(
        "feedha_adapter_source_lag_messages",
        "source messages behind the active's last report (0 on the active)",
        labels,
        sample.lag,
    )
    yield _counter(
        "feedha_adapter_desync_episodes", "episodes of lost synchronization", labels, sample.desync_episodes
    )
    yield _gauge(
        "feedha_adapter_throttled", "1 while a backup ahead is throttled", labels, status["throttled"]
    )
    yield _counter(
        "feedha_adapter_throttled_seconds", "time spent throttled (sampled)", labels, sample.throttled_s
    )
    yield _counter(
        "feedha_adapter_snapshots_adopted",
        "conversion-state snapshots adopted",
        labels,
        status["snapshots_adopted"],
    )


def _line_metrics(sample: Sample, labels: Mapping[str, str], line: str) -> Iterator[Metric]:
    status = sample.status
    yield _counter("feedha_adapter_published_messages", "messages published", labels, status["published"])
    yield _counter("feedha_adapter_line_packets", "packets built", labels, status["packets"], line=line)
    yield _counter("feedha_adapter_line_bytes", "packet bytes sent", labels, sample.line_bytes, line=line)
    yield _counter(
        "feedha_adapter_line_heartbeats", "idle heartbeat packets", labels, status["heartbeats"], line=line
    )
    yield _counter(
        "feedha_adapter_line_dropped_packets",
        "packets dropped before the line (held output)",
        labels,
        status["dropped_packets"],
        line=line,
    )


def _source_metrics(sample: Sample, labels: Mapping[str, str]) -> Iterator[Metric]:
    status = sample.status
    yield _gauge("feedha_adapter_last_source_seq", "last source_seq taken", labels, status["last_source_seq"])
    yield _counter("feedha_adapter_source_gaps", "gaps in the source stream", labels, status["source_gaps"])
    yield _counter(
        "feedha_adapter_source_duplicates", "repeated source messages dropped", labels, status["duplicates"]
    )
    errors = CounterMetricFamily(
        "feedha_adapter_source_errors", "source input that could not be used", labels=[*labels, "kind"]
    )
    for kind in _ERROR_KINDS:
        errors.add_metric([*labels.values(), kind], status.get(kind, 0))
    yield errors
    quarantined = CounterMetricFamily(
        "feedha_adapter_quarantined_messages", "source messages quarantined", labels=[*labels, "reason"]
    )
    for reason, count in sorted(status.get("quarantined", {}).items()):
        quarantined.add_metric([*labels.values(), str(reason)], count)
    yield quarantined
    yield from _accounting_metrics(status, labels)


def _accounting_metrics(status: Mapping[str, Any], labels: Mapping[str, str]) -> Iterator[Metric]:
    # Where every source position went (adapter/core/accounting.py), and what was skipped by type.
    skipped = CounterMetricFamily(
        "feedha_adapter_skipped_messages",
        "source messages that are not market data, by type",
        labels=[*labels, "type"],
    )
    for kind, count in sorted(status.get("skipped_types", {}).items()):
        skipped.add_metric([*labels.values(), str(kind)], count)
    yield skipped
    accounting = status.get("accounting")
    if not accounting:
        return
    positions = CounterMetricFamily(
        "feedha_adapter_source_positions",
        "source positions passed, by what became of them (numbered, quarantined, skipped, in_gaps, "
        "declared_absent)",
        labels=[*labels, "disposition"],
    )
    for disposition in ("numbered", "quarantined", "skipped", "in_gaps", "declared_absent"):
        positions.add_metric([*labels.values(), disposition], accounting[disposition])
    yield positions
    yield _counter(
        "feedha_adapter_source_gap_ranges", "source gaps booked (ranges)", labels, accounting["gap_ranges"]
    )
    yield _counter(
        "feedha_adapter_source_unplaced",
        "quarantined or skipped items that took no source position",
        labels,
        accounting["unplaced"],
    )
    yield _gauge(
        "feedha_adapter_source_unexplained",
        "source positions passed but not booked (0 unless the bookkeeping is wrong)",
        labels,
        accounting["unexplained"],
    )


def _journal_metrics(sample: Sample, labels: Mapping[str, str]) -> Iterator[Metric]:
    status = sample.status
    yield _counter("feedha_adapter_journaled_messages", "messages journaled", labels, status["journaled"])
    yield _counter(
        "feedha_adapter_replay_requests",
        "retransmission requests served",
        labels,
        status.get("replay_requests", 0),
    )
    yield _counter(
        "feedha_adapter_replay_refused",
        "retransmission requests refused",
        labels,
        status.get("replay_refused", 0),
    )
    access = status.get("access", {})
    refused = CounterMetricFamily(
        "feedha_adapter_access_refused",
        "connections refused by CURVE/ZAP (not granted), by socket",
        labels=[*labels, "socket"],
    )
    for where, count in sorted(access.get("refused", {}).items()):
        refused.add_metric([*labels.values(), str(where)], count)
    yield refused
    yield _gauge(
        "feedha_adapter_granted_keys", "subscriber keys admitted now", labels, access.get("granted_keys", 0)
    )
    if sample.sync_bounds:
        cumulative, buckets = 0, []
        for bound, count in zip((*sample.sync_bounds, float("inf")), sample.sync_counts, strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        histogram = HistogramMetricFamily(
            "feedha_adapter_journal_fsync_seconds",
            "duration of a synced group commit (write and fsync)",
            labels=list(labels),
        )
        histogram.add_metric(list(labels.values()), buckets, sample.sync_total_s)
        yield histogram


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
