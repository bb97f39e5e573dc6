"""An optional Prometheus collector for a feed client: gaps, lost, duplicates, term changes, latency.

Usage (the application exposes its own registry, e.g. with
``prometheus_client.start_http_server``)::

    from prometheus_client import REGISTRY
    from feedha.client.metrics import FeedClientCollector

    with FeedClient(admin, key_id, secret) as client:
        FeedClientCollector(client, registry=REGISTRY)

The collector reads the client's counters when scraped (per channel: the
arbiter's delivered, duplicates, gaps, lost, conflicts, stale and garbage
packets; per kind: the status events) and measures each delivery's latency,
from the packet's send time (the adapter's clock) to the moment the client
hands it to the application (this host's clock: on one host, or hosts in
NTP/PTP sync, that is the end-to-end latency), in histogram buckets.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from feedha.client.async_feed_client import AsyncFeedClient
    from feedha.client.feed_client import FeedClient

LATENCY_BUCKETS_S: Final = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_ARBITER_COUNTERS: Final = (
    ("delivered", "messages delivered in order (before the symbol filter)"),
    ("duplicates", "copies dropped because another line's came first"),
    ("gaps", "holes seen (each filled, recovered or lost)"),
    ("lost", "messages given up as lost"),
    ("conflicts", "copies that named different source messages"),
    ("stale", "packets dropped from a lower term (a demoted active)"),
    ("garbage", "packets that failed to decode"),
    ("retransmission_requests", "holes asked of a replay service"),
)


class LatencyBuckets:
    """Delivery latencies in histogram buckets (seconds); written by the polling thread only."""

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS_S) -> None:
        self.bounds_ns = tuple(round(b * 1e9) for b in bounds)
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total_ns = 0

    def __repr__(self) -> str:
        return f"<LatencyBuckets [count={sum(self.counts)}]>"

    def observe_ns(self, latency_ns: int) -> None:
        """One delivery's latency in ns (negative values, clock skew, count as 0)."""
        latency_ns = max(0, latency_ns)
        self.counts[bisect.bisect_left(self.bounds_ns, latency_ns)] += 1
        self.total_ns += latency_ns


class FeedClientCollector(Collector):
    """Collects one client's figures (register it with the application's registry).

    Args:
        client: a :class:`~feedha.client.FeedClient` or :class:`~feedha.client.AsyncFeedClient`.
        registry: where to register (``None``: not registered; call ``registry.register`` yourself).
        prefix: metric name prefix.
    """

    def __init__(
        self,
        client: FeedClient | AsyncFeedClient,
        *,
        registry: CollectorRegistry | None = None,
        prefix: str = "feedha_client",
    ) -> None:
        self._client = client
        self._prefix = prefix
        self.latency = LatencyBuckets()
        client._core.latency = self.latency  # the core observes each delivery from now on
        if registry is not None:
            registry.register(self)

    def __repr__(self) -> str:
        return f"<FeedClientCollector [{self._client!r}, {self.latency!r}]>"

    def collect(self) -> Iterator[Metric]:
        """The client's figures now."""
        p, stats = self._prefix, self._client.stats()
        yield CounterMetricFamily(f"{p}_handed", "messages handed to the application", value=stats.delivered)
        yield CounterMetricFamily(f"{p}_filtered", "messages of symbols not subscribed", value=stats.filtered)
        yield CounterMetricFamily(
            f"{p}_replay_requests", "gaps asked of replay services", value=stats.replay_requests
        )
        yield GaugeMetricFamily(f"{p}_lines", "line sockets joined", value=stats.lines)
        events = CounterMetricFamily(f"{p}_status_events", "status events by kind", labels=["kind"])
        for kind, count in sorted(stats.status_events.items()):
            events.add_metric([kind], count)
        yield events
        for name, doc in _ARBITER_COUNTERS:
            family = CounterMetricFamily(f"{p}_{name}", doc, labels=["channel"])
            for channel, arbiter in sorted(stats.channels.items()):
                family.add_metric([channel], getattr(arbiter, name))
            yield family
        term = GaugeMetricFamily(
            f"{p}_term", "the highest term seen (it grows at every failover)", labels=["channel"]
        )
        for channel, arbiter in sorted(stats.channels.items()):
            term.add_metric([channel], arbiter.highest_term or 0)
        yield term
        latency, cumulative, buckets = self.latency, 0, []
        for bound, count in zip((*latency.bounds, float("inf")), list(latency.counts), strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        histogram = HistogramMetricFamily(
            f"{p}_delivery_latency_seconds", "packet send time to delivery to the application"
        )
        histogram.add_metric([], buckets, latency.total_ns / 1e9)
        yield histogram
