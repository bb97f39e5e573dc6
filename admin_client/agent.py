"""The adapter side of the registry: :class:`RegistryAgent` keeps an adapter registered.

An adapter process runs one agent. The agent logs in (when given an API
key), opens ``AdapterRegistry.Connect``, sends the registration, then a
status snapshot every ``interval_s`` taken from a callable the adapter
passes in, and hands every operator command to an async callback. When the
server is down or the stream breaks, it reconnects with capped exponential
backoff. It never blocks the adapter: it runs in its own task, the status
callable must be quick and non-blocking, and data keeps flowing whatever
the admin server does.

Example::

    agent = RegistryAgent(
        "127.0.0.1:50051",
        AdapterRegistration(feed="EQUITIES", channel_name="EQ-A-M", channel_number=1,
                            adapter_id="eq1-a", line_endpoint="tcp://10.0.0.1:6001",
                            replay_endpoint="tcp://10.0.0.1:6101", sync_endpoint="tcp://10.0.0.1:6201",
                            role=AdapterRole.BACKUP, term=3),
        status=lambda: AdapterStatus(role=..., term=..., next_msg_seq=..., sync_status=SyncStatus.IN_SYNC,
                                     health_score=97.0, lag=0),
        on_command=handle_command,          # async def handle_command(command: Command) -> None
        credentials=("fk_...", "secret"),   # a key whose user has role adapter (or admin)
        tls=None,                           # or True / TlsConfig(...) for TLS
    )
    async with agent:                       # starts the background task; exit cancels it cleanly
        ...                                 # the adapter's own work
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Final

import grpc

from feedha.admin_client.channel import TlsConfig, login, open_channel
from feedha.proto import admin_pb2, admin_pb2_grpc
from feedha.proto.registry import (
    AdapterRegistration,
    AdapterStatus,
    Command,
    CommandResult,
    command_from_proto,
    registration_to_proto,
    result_to_proto,
    status_to_proto,
)
from feedha.transport.tasks import cancel_and_wait

logger = logging.getLogger(__name__)

STATUS_INTERVAL_S: Final = 1.0
RESULTS_QUEUED: Final = 256  # command results waiting for the stream (the oldest go first when full)
RECONNECT_INITIAL_S: Final = 0.2
RECONNECT_MAX_S: Final = 5.0
# The server refused this adapter's key or registration (not a network problem).
_REFUSALS: Final = frozenset(
    {
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.FAILED_PRECONDITION,
    }
)

StatusSource = Callable[[], AdapterStatus]
CommandHandler = Callable[[Command], Awaitable[None]]


def reconnect_delay(
    attempt: int, *, initial_s: float = RECONNECT_INITIAL_S, max_s: float = RECONNECT_MAX_S
) -> float:
    """The wait before reconnect attempt ``attempt`` (1-based): doubling from ``initial_s``, capped."""
    if attempt <= 0:
        return 0.0
    return min(max_s, initial_s * 2.0 ** (attempt - 1))


class RegistryAgent:
    """Registers an adapter with the admin server, streams its status, receives operator commands.

    Args:
        target: the admin server, ``host:port``.
        registration: what the adapter declares; on every (re)connect it is
            sent with ``role`` and ``term`` replaced by the latest status's.
        status: called every ``interval_s`` in the event loop; returns the
            current :class:`AdapterStatus`. Must not block. An exception is
            logged and that report skipped.
        on_command: awaited for each operator command (PROMOTE/DEMOTE with
            the term to adopt, FAIL, THROTTLE with ``rate``), in order. An
            exception is logged; the stream goes on.
        credentials: ``(key_id, secret)`` of a user with role ``adapter`` or
            ``admin``; ``None`` when the server runs with ``adapter_auth: false``.
        tls: ``None``/``False`` for plaintext, ``True`` for TLS with the
            system roots, or a :class:`~admin_client.channel.TlsConfig`.
        interval_s: seconds between status reports.
        reconnect_initial_s: first reconnect delay (doubles up to ``reconnect_max_s``).
        reconnect_max_s: reconnect delay cap.
    """

    def __init__(
        self,
        target: str,
        registration: AdapterRegistration,
        status: StatusSource,
        on_command: CommandHandler,
        *,
        credentials: tuple[str, str] | None = None,
        tls: TlsConfig | bool | None = None,
        interval_s: float = STATUS_INTERVAL_S,
        reconnect_initial_s: float = RECONNECT_INITIAL_S,
        reconnect_max_s: float = RECONNECT_MAX_S,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s!r}")
        self.target = target
        self.registration = registration
        self._status = status
        self._on_command = on_command
        self._credentials = credentials
        self._tls = tls
        self.interval_s = interval_s
        self._reconnect = (reconnect_initial_s, reconnect_max_s)
        self._task: asyncio.Task[None] | None = None
        self._results: asyncio.Queue[CommandResult] | None = None  # made on the agent's loop
        self.is_connected = False
        self.connections = 0
        self.commands_received = 0
        self.last_error: str | None = None

    def __repr__(self) -> str:
        state = "connected" if self.is_connected else "disconnected"
        return (
            f"<RegistryAgent {self.registration.adapter_id} [{state}, connections={self.connections}, "
            f"commands={self.commands_received}]>"
        )

    def report_result(self, result: CommandResult) -> None:
        """Send a command's result to the server (call on the agent's loop; sent on the live stream).

        Results wait while the stream is down, at most ``RESULTS_QUEUED`` (the oldest are dropped).
        """
        if self._results is None:
            self._results = asyncio.Queue(RESULTS_QUEUED)
        if self._results.full():
            self._results.get_nowait()
        self._results.put_nowait(result)

    def start(self) -> None:
        """Start the background task (idempotent). Returns at once."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(
                self.run(), name=f"registry-agent-{self.registration.adapter_id}"
            )

    async def stop(self) -> None:
        """Cancel the background task and wait for it to end."""
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task)

    async def __aenter__(self) -> RegistryAgent:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await asyncio.shield(self.stop())

    async def run(self) -> None:
        """Stay registered until cancelled: connect, report, reconnect with backoff."""
        attempt = 0
        while True:
            try:
                await self._session()
                attempt = 0  # the server closed a healthy stream: retry promptly
            except grpc.aio.AioRpcError as exc:
                self.last_error = f"{exc.code().name}: {exc.details()}"
                if exc.code() in _REFUSALS:  # retried (a policy fix needs no restart), but said loudly
                    logger.warning(
                        "registry agent %s: refused: %s", self.registration.adapter_id, self.last_error
                    )
            except (OSError, RuntimeError, asyncio.InvalidStateError) as exc:
                # InvalidStateError: grpc refuses a write on a call that just ended.
                self.last_error = str(exc) or type(exc).__name__
            finally:
                self.is_connected = False
            attempt += 1
            delay = reconnect_delay(attempt, initial_s=self._reconnect[0], max_s=self._reconnect[1])
            logger.info(
                "registry agent %s: reconnect in %.1f s (%s)",
                self.registration.adapter_id,
                delay,
                self.last_error,
            )
            await asyncio.sleep(delay)

    async def _session(self) -> None:
        async with open_channel(self.target, self._tls) as channel:
            metadata: tuple[tuple[str, str], ...] = ()
            if self._credentials is not None:
                key_id, secret = self._credentials
                metadata = (await login(channel, key_id, secret)).metadata
            stub = admin_pb2_grpc.AdapterRegistryStub(channel)  # type: ignore[no-untyped-call]
            call = stub.Connect(metadata=metadata)
            registration = self.registration
            snapshot = self._snapshot()
            if snapshot is not None:
                registration = dataclasses.replace(registration, role=snapshot.role, term=snapshot.term)
            await call.write(admin_pb2.ConnectRequest(registration=registration_to_proto(registration)))
            self.is_connected = True
            self.connections += 1
            logger.info("registry agent %s: registered with %s", registration.adapter_id, self.target)
            reader = asyncio.create_task(self._read_commands(call))
            try:
                while not reader.done():
                    snapshot = self._snapshot()
                    try:
                        if snapshot is not None:
                            await call.write(admin_pb2.ConnectRequest(status=status_to_proto(snapshot)))
                        await self._send_results(call, reader)
                    except asyncio.InvalidStateError:
                        # The call ended (server gone) after the reader's last check:
                        # the reader holds the reason, await it below.
                        break
                await reader  # re-raise what ended the stream
            finally:
                try:
                    with contextlib.suppress(grpc.aio.AioRpcError):
                        await cancel_and_wait(reader)
                finally:
                    call.cancel()

    async def _send_results(self, call: grpc.aio.StreamStreamCall, reader: asyncio.Task[None]) -> None:
        # Until the next status report is due: send each command result as it comes.
        if self._results is None:
            self._results = asyncio.Queue(RESULTS_QUEUED)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.interval_s
        while not reader.done() and (remaining := deadline - loop.time()) > 0:
            getter = asyncio.ensure_future(self._results.get())
            await asyncio.wait({getter, reader}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            if not getter.done():
                await cancel_and_wait(getter)
            if getter.done() and not getter.cancelled():
                await call.write(admin_pb2.ConnectRequest(result=result_to_proto(getter.result())))

    def _snapshot(self) -> AdapterStatus | None:
        try:
            return self._status()
        except Exception:  # the adapter's bug must not stop its registration
            logger.exception("registry agent %s: status callable failed", self.registration.adapter_id)
            return None

    async def _read_commands(self, call: grpc.aio.StreamStreamCall) -> None:
        async for message in call:
            try:
                command = command_from_proto(message.command)
            except ValueError as exc:
                logger.warning("registry agent %s: %s", self.registration.adapter_id, exc)
                continue
            self.commands_received += 1
            logger.info(
                "registry agent %s: command %s term=%d",
                self.registration.adapter_id,
                command.kind.value,
                command.term,
            )
            try:
                await self._on_command(command)
            except Exception:
                logger.exception("registry agent %s: command handler failed", self.registration.adapter_id)
