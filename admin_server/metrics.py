"""The admin server's Prometheus metrics: read from the hub when scraped.

The hub counts what happens (:class:`~feedha.admin_server.counters.HubCounters`);
this collector turns the counts and the registry's current state into metric
families at scrape time, on the server's event loop (the HTTP server runs
there), so nothing is locked and nothing is counted twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from feedha.admin_server.hub import Hub
from feedha.proto.registry import AdapterRole
from feedha.transport.http import HttpCounters


class AdminMetrics(Collector):
    """The collector over one hub (and the HTTP server's own counters).

    Args:
        hub: the server's hub.
        http: the HTTP server's counters, if it runs.
        status_sessions: how many status-page sessions are open (a callable: read per scrape).
    """

    def __init__(
        self,
        hub: Hub,
        *,
        http: HttpCounters | None = None,
        status_sessions: Callable[[], int] = lambda: 0,
    ) -> None:
        self._hub = hub
        self._http = http
        self._status_sessions = status_sessions
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        ProcessCollector(registry=self.registry)

    def __repr__(self) -> str:
        return f"<AdminMetrics [{self._hub!r}]>"

    def collect(self) -> Iterator[Metric]:
        """Every family, from the hub's counters and state now."""
        yield from self._counters()
        yield from self._state()
        yield from self._adapters()
        yield from self._http_responses()

    def _counters(self) -> Iterator[Metric]:
        # What the hub counted since it started.
        counters = self._hub.counters
        yield _by("feedha_admin_logins", "API-key logins by result", "result", counters.logins)
        yield _counter(
            "feedha_admin_routes_granted", "routes handed out (subscribe, modify)", counters.routes_granted
        )
        yield _by(
            "feedha_admin_policy_reloads",
            "policy file reloads by result",
            "result",
            counters.policy_reloads,
        )
        yield _by(
            "feedha_admin_registry_changes",
            "adapter registry changes by kind",
            "kind",
            counters.registry_changes,
        )
        yield _by(
            "feedha_admin_operator_commands",
            "operator commands sent",
            "action",
            counters.commands,
        )
        yield _by(
            "feedha_admin_purges", "purges by result (accepted, or why refused)", "result", counters.purges
        )
        yield _by(
            "feedha_admin_denied",
            "operator calls refused for want of the admin role, by method",
            "method",
            counters.denied,
        )

    def _state(self) -> Iterator[Metric]:
        # What is open and stored now.
        hub = self._hub
        yield _gauge("feedha_admin_adapter_sessions", "adapter registry streams connected", len(hub.adapters))
        yield _gauge(
            "feedha_admin_open_watches",
            "route watches, event watches and status feeds open",
            hub.events.listeners,
        )
        yield _by(
            "feedha_admin_route_watch",
            "route watches marked by a change that concerns them (marks), and woken to re-plan (wakes)",
            "what",
            hub.events.tally,
        )
        yield _gauge(
            "feedha_admin_status_page_sessions", "status page sessions logged in", self._status_sessions()
        )
        yield _gauge("feedha_admin_subscriptions", "stored subscriptions", len(hub.store.subscriptions()))

    def _http_responses(self) -> Iterator[Metric]:
        # The HTTP endpoint's answers (when it serves one).
        if self._http is not None:
            yield _by(
                "feedha_admin_http_responses",
                "HTTP responses by status",
                "status",
                self._http.by_status,
            )
            yield _counter(
                "feedha_admin_http_refused", "HTTP connections refused (over the cap)", self._http.refused
            )

    def _adapters(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "feedha_admin_adapters_up", "registered adapters up, per channel", labels=["channel"]
        )
        term = GaugeMetricFamily(
            "feedha_admin_channel_term", "the channel's highest term", labels=["channel"]
        )
        active = GaugeMetricFamily(
            "feedha_admin_channel_has_active", "1 when an up adapter reports active", labels=["channel"]
        )
        registry = self._hub.adapters.registry
        for channel in registry.channel_names():
            members = registry.lines(channel)
            up.add_metric([channel], sum(r.is_up for r in members))
            term.add_metric([channel], max((r.status.term for r in members), default=0))
            current = registry.active(channel)
            active.add_metric(
                [channel], float(current is not None and current.status.role is AdapterRole.ACTIVE)
            )
        yield from (up, term, active)


def _gauge(name: str, doc: str, value: float) -> Metric:
    return GaugeMetricFamily(name, doc, value=value)


def _counter(name: str, doc: str, value: float) -> Metric:
    return CounterMetricFamily(name, doc, value=value)


def _by(name: str, doc: str, label: str, values: Mapping[str, int] | Mapping[int, int]) -> Metric:
    family = CounterMetricFamily(name, doc, labels=[label])
    for key, value in sorted((str(k), v) for k, v in values.items()):
        family.add_metric([key], value)
    return family
