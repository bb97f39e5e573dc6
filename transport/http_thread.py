"""An HTTP server on an asyncio loop of its own thread, for daemons that are not asyncio.

The adapter is threads and a ZeroMQ poller, not an event loop: its /metrics,
/healthz and /readyz (a :class:`~feedha.transport.http.HttpServer`) run on a
loop of their own, in a thread of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Mapping

from feedha.transport.http import Handler, HttpLimits, HttpServer


class HttpThread:
    """An :class:`HttpServer` on an asyncio loop of its own thread (for daemons that are not asyncio).

    Args:
        routes: see :class:`HttpServer`.
        host: address to bind.
        port: port to bind (0: any).
        limits: see :class:`HttpLimits`.
    """

    def __init__(
        self, routes: Mapping[str, Handler], *, host: str, port: int, limits: HttpLimits | None = None
    ) -> None:
        self.server = HttpServer(routes, host=host, port=port, limits=limits)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="http", daemon=True)

    def __repr__(self) -> str:
        return f"<HttpThread {self.server!r}>"

    def start(self, timeout: float = 10.0) -> int:
        """Start the thread and bind; returns the bound port.

        Raises:
            OSError: the address cannot be bound.
        """
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self.server.start(), self._loop)
        try:
            return future.result(timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and end the thread. Idempotent."""
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(timeout)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        if not self._loop.is_running():
            self._loop.close()
