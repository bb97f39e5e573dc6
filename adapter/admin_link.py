"""The adapter's link to the stream administration server.

The admin server is a control plane: the adapter registers, reports its
role, term, position and health, and takes operator commands, but data
never waits for it. :class:`AdminLink` runs the admin client's
:class:`~admin_client.agent.RegistryAgent` on its own thread and event loop;
the runner reads commands from :attr:`AdminLink.commands` between batches and
the agent reads the runner's status through a quick, lock-free callable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Callable

from admin_client import RegistryAgent
from proto.registry import AdapterRegistration, AdapterStatus, Command

logger = logging.getLogger(__name__)


class AdminLink:
    """Keeps one adapter registered with the admin server, on a background thread.

    Args:
        target: the admin server's ``host:port``.
        registration: what the adapter registers as.
        status: returns the adapter's current status; called on the link's thread.
        credentials: ``(key_id, secret)`` of a user with the adapter role, or None.
    """

    def __init__(
        self,
        target: str,
        registration: AdapterRegistration,
        status: Callable[[], AdapterStatus],
        *,
        credentials: tuple[str, str] | None = None,
        interval_s: float = 0.5,
    ) -> None:
        self.commands: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self._target = target
        self._registration = registration
        self._status = status
        self._credentials = credentials
        self._interval_s = interval_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="admin-link", daemon=True)
        self._started = threading.Event()

    def __repr__(self) -> str:
        return f"<AdminLink [target={self._target}, alive={self._thread.is_alive()}]>"

    def start(self) -> None:
        """Start the link's thread; returns once its event loop runs."""
        self._thread.start()
        self._started.wait(5)

    def stop(self) -> None:
        """Ask the link to unregister and stop; waits briefly for the thread."""
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=5)

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._started.set()

        async def on_command(command: Command) -> None:
            self.commands.put(command)

        agent = RegistryAgent(
            self._target,
            self._registration,
            self._status,
            on_command,
            credentials=self._credentials,
            interval_s=self._interval_s,
        )
        with contextlib.suppress(asyncio.CancelledError):
            async with agent:
                await self._stop.wait()
