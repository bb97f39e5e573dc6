"""Plans and starts adapter groups on this machine (demo, drills, tests).

A :class:`GroupPlan` fixes every endpoint of one channel's adapter group up
front (each adapter must know its peers' sync endpoints before it starts);
:func:`start_adapter` runs one adapter of the plan as a real process.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import zmq

from feedha.ports import free_ports
from feedha.procs import SOURCE_NICE, JsonProcess


@dataclass(frozen=True, slots=True)
class AdapterPlan:
    adapter: int
    line: str
    sync: str
    control: str
    replay: str = ""  # replay service endpoint, served only with a journal
    journal: Path | None = None  # journal directory (None: the adapter runs without one)
    delayed: str = ""  # delayed line endpoint ("": none; needs a journal)
    conflated: str = ""  # conflated line endpoint ("": none)


@dataclass(frozen=True, slots=True)
class GroupPlan:
    channel: str
    channel_number: int
    source_endpoint: str
    source_stream: str
    source_stream_number: int
    adapters: tuple[AdapterPlan, ...]
    conflate_interval: float = 0.0  # the conflated lines' interval (0: none)

    @property
    def lines(self) -> tuple[str, ...]:
        return tuple(a.line for a in self.adapters)

    @property
    def delayed_lines(self) -> tuple[str, ...]:
        """The delayed lines of the adapters that serve one."""
        return tuple(a.delayed for a in self.adapters if a.delayed and a.journal is not None)

    @property
    def conflated_lines(self) -> tuple[str, ...]:
        """The conflated lines of the adapters that serve one."""
        return tuple(a.conflated for a in self.adapters if a.conflated)

    @property
    def replays(self) -> tuple[str, ...]:
        """The replay endpoints of the adapters that journal (for ``client_lib.ReplayClient``)."""
        return tuple(a.replay for a in self.adapters if a.replay and a.journal is not None)

    def adapter(self, number: int) -> AdapterPlan:
        for plan in self.adapters:
            if plan.adapter == number:
                return plan
        raise KeyError(f"no adapter {number} in channel {self.channel}")


def plan_group(
    *,
    channel: str,
    channel_number: int,
    source_endpoint: str,
    source_stream: str,
    source_stream_number: int,
    size: int,
    host: str = "127.0.0.1",
    journal_root: Path | None = None,
    delayed: bool = False,
    conflate_interval: float = 0.0,
) -> GroupPlan:
    """Choose endpoints for a group of ``size`` adapters numbered 1..size.

    With ``journal_root``, adapter *n* journals to ``journal_root/<channel>-<n>``
    and serves replay requests from it; with ``delayed`` too, it serves a delayed line.
    With ``conflate_interval`` (seconds), every adapter serves a conflated line.
    """
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    if delayed and journal_root is None:
        raise ValueError("a delayed line is served from a journal: give journal_root")
    ports = free_ports(6 * size, host)
    adapters = tuple(
        AdapterPlan(
            adapter=i + 1,
            line=f"tcp://{host}:{ports[6 * i]}",
            sync=f"tcp://{host}:{ports[6 * i + 1]}",
            control=f"tcp://{host}:{ports[6 * i + 2]}",
            replay=f"tcp://{host}:{ports[6 * i + 3]}",
            journal=None if journal_root is None else journal_root / f"{channel}-{i + 1}",
            delayed=f"tcp://{host}:{ports[6 * i + 4]}" if delayed else "",
            conflated=f"tcp://{host}:{ports[6 * i + 5]}" if conflate_interval else "",
        )
        for i in range(size)
    )
    return GroupPlan(
        channel,
        channel_number,
        source_endpoint,
        source_stream,
        source_stream_number,
        adapters,
        conflate_interval,
    )


def adapter_argv(group: GroupPlan, number: int, *, active: bool, extra: Sequence[str] = ()) -> list[str]:
    """The ``feedha adapter`` arguments for adapter ``number`` of the group."""
    me = group.adapter(number)
    argv = [
        "--channel",
        group.channel,
        "--channel-number",
        str(group.channel_number),
        "--adapter",
        str(number),
        "--source",
        group.source_endpoint,
        "--source-stream",
        group.source_stream,
        "--source-stream-number",
        str(group.source_stream_number),
        "--line",
        me.line,
        "--sync",
        me.sync,
        "--control",
        me.control,
    ]
    for peer in group.adapters:
        if peer.adapter != number:
            argv += ["--peer", peer.sync]
    if me.journal is not None:
        argv += ["--journal", str(me.journal)]
        if me.replay:
            argv += ["--replay", me.replay]
        if me.delayed:
            argv += ["--delayed-line", me.delayed]
    if me.conflated:
        argv += ["--conflate-line", me.conflated, "--conflate-interval", f"{group.conflate_interval:g}"]
    if active:
        argv.append("--active")
    return argv + list(extra)


def start_adapter(
    group: GroupPlan,
    number: int,
    *,
    active: bool,
    extra: Sequence[str] = (),
    log: IO[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> JsonProcess:
    """Start adapter ``number`` of the group as a process and return it (not yet ready)."""
    return JsonProcess.python(
        f"{group.channel}/adapter-{number}",
        "feedha.adapter",
        adapter_argv(group, number, active=active, extra=extra),
        log=log,
        env=env,
    )


def start_source(
    endpoints: Mapping[str, str],
    *,
    kind: str,
    rate: float,
    wait_subscribers: int,
    workdir: Path,
    extra: Sequence[str] = (),
    log: IO[str] | None = None,
) -> JsonProcess:
    """Start the feed source (``kind``: ``plain`` or ``spark``) publishing each stream on its endpoint.

    It sends 400 symbols at ``rate`` msg/s in all once ``wait_subscribers``
    adapters have subscribed to each stream; the Spark job checkpoints under
    ``workdir``. The source runs at a lower CPU priority (see :data:`SOURCE_NICE`).
    """
    args = ["--streams", ",".join(endpoints), "--rate", f"{rate:g}", "--symbols", "400"]
    args += ["--wait-subscribers", str(wait_subscribers), *extra]
    for stream, endpoint in endpoints.items():
        args += ["--endpoint", f"{stream}={endpoint}"]
    if kind == "spark":
        args += ["--checkpoint", str(workdir / "spark-checkpoint")]
    module = "feedha.spark_feed.job" if kind == "spark" else "feedha.plain_source"
    return JsonProcess.python("source", module, args, log=log, nice=SOURCE_NICE)


def control(endpoint: str, cmd: str, *, timeout: float = 5.0, **fields: object) -> dict[str, object]:
    """Send one JSON command to an adapter's control socket and return its reply.

    Raises:
        TimeoutError: no reply within ``timeout`` seconds.
    """
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    sock = ctx.socket(zmq.REQ)
    sock.linger = 0
    try:
        sock.connect(endpoint)
        sock.send(json.dumps({"cmd": cmd, **fields}).encode())
        if not sock.poll(int(timeout * 1000)):
            raise TimeoutError(f"no reply from {endpoint} to {cmd!r} within {timeout}s")
        reply: dict[str, object] = json.loads(sock.recv())
        return reply
    finally:
        sock.close(linger=0)
