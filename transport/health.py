"""The endpoints every daemon serves to its monitoring: ``/metrics``, ``/healthz`` and ``/readyz``.

``/metrics`` is the Prometheus text format of a ``prometheus_client``
registry (each daemon keeps its own, never the process-global one, so a test
that runs two in one process sees each apart). ``/healthz`` answers 200 while
the daemon's main loop turns (liveness: restart me if not); ``/readyz`` 200
while it does its job (readiness: send me traffic). Each check returns
``(ok, reason)`` and the reason is the body, so ``curl`` tells why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from feedha.transport.http import Handler, Request, Response, Stream, text

Check = Callable[[], tuple[bool, str]]

METRICS_PATH: Final = "/metrics"
HEALTH_PATH: Final = "/healthz"
READY_PATH: Final = "/readyz"


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

    def check_route(check: Check) -> Handler:
        async def route(_request: Request) -> Response | Stream:
            try:
                ok, reason = check()
            except Exception as exc:  # a check that fails is a failed check, not a 500
                ok, reason = False, f"check failed: {exc!r}"
            return text(200 if ok else 503, f"{'ok' if ok else 'not ok'}: {reason}\n")

        return route

    return {METRICS_PATH: metrics, HEALTH_PATH: check_route(alive), READY_PATH: check_route(ready)}
