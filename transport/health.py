"""The endpoints every daemon serves to its monitoring: ``/metrics``, ``/healthz`` and ``/readyz``.

``/metrics`` is the Prometheus text format of a ``prometheus_client``
registry (each daemon keeps its own, never the process-global one, so a test
that runs two in one process sees each apart). ``/healthz`` answers 200 while
the daemon's main loop turns (liveness: restart me if not); ``/readyz`` 200
while it does its job (readiness: send me traffic). Each check returns
``(ok, reason)`` and the reason is the body, so ``curl`` tells why.

Probes deserve a listener of their own (``--health HOST:PORT``): on the
metrics listener they share the connection cap with scrapes and the status
page, and an orchestrator that sees a probe go unanswered restarts a healthy
daemon. :func:`probe_routes` are the two probes alone, served with
:data:`PROBE_LIMITS`: a short header timeout, and (as on every listener) an
idle connection gives its slot up to a new one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from feedha.transport.http import Handler, HttpLimits, Request, Response, Stream, text

Check = Callable[[], tuple[bool, str]]

METRICS_PATH: Final = "/metrics"
HEALTH_PATH: Final = "/healthz"
READY_PATH: Final = "/readyz"
# A probe sends its request at once and reads a few bytes: a connection that is slower than
# this is not a probe. Idle ones give their slot up to new connections (see transport.http).
# Idle connections are cheap to hold and costly to churn: a high cap makes a flood of them sit
# rather than evict each other (it would have to open ~2,500 a second to keep every slot young).
PROBE_LIMITS: Final = HttpLimits(
    max_connections=256, header_bytes=4096, header_timeout_s=1.0, write_timeout_s=2.0
)


def probe_routes(*, alive: Check, ready: Check) -> dict[str, Handler]:
    """``/healthz`` and ``/readyz`` alone, for a listener of their own (see :data:`PROBE_LIMITS`)."""
    return {HEALTH_PATH: _check_route(alive), READY_PATH: _check_route(ready)}


def _check_route(check: Check) -> Handler:
    async def route(_request: Request) -> Response | Stream:
        try:
            ok, reason = check()
        except Exception as exc:  # a check that fails is a failed check, not a 500
            ok, reason = False, f"check failed: {exc!r}"
        return text(200 if ok else 503, f"{'ok' if ok else 'not ok'}: {reason}\n")

    return route


def health_routes(*, registry: CollectorRegistry, alive: Check, ready: Check) -> dict[str, Handler]:
    """The three routes over a registry and two checks.

    Args:
        registry: what ``/metrics`` exposes.
        alive: liveness check, called per ``/healthz`` request.
        ready: readiness check, called per ``/readyz`` request.

    Returns:
        ``{path: handler}`` for :class:`~feedha.transport.http.HttpServer`.
    """

    async def metrics(_request: Request) -> Response | Stream:
        # On the loop: collectors read the daemon's state, which lives on it (or,
        # for the adapter, a snapshot its loop publishes), and take well under a ms.
        body = generate_latest(registry)
        return Response(200, body, content_type=CONTENT_TYPE_LATEST)

    return {METRICS_PATH: metrics, **probe_routes(alive=alive, ready=ready)}
