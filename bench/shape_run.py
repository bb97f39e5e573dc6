"""The bare model's orchestrator: one run of :mod:`bench.shape`'s processes, and what it measured.

:func:`run_shape` starts the source, the relays and the client (``python -m
feedha.bench.shape source|relay|client``), lets the source go once the client
has joined every line, and returns what they report; the module docstring of
:mod:`bench.shape` says what the model is and what comparing with it means.
"""

from __future__ import annotations

import os
import signal
import tempfile
from dataclasses import dataclass
from typing import IO, Any

from feedha.bench.shape import DEFAULT_SIZE, STAMP, check_hold
from feedha.plain_source.config import MAX_BATCH


@dataclass(frozen=True, kw_only=True)
class ShapeOptions:
    """One run of the bare model.

    Attributes:
        relays: relay processes (one per adapter of the pipeline it stands beside).
        count: messages to send.
        rate: msg/s (0: unpaced, as fast as the source can; frames are then always full).
        size: bytes per message (the plain source's mean FIX message by default).
        batch: most messages per frame.
        latency: the client records every delivery's latency (from the scheduled send time).
        measure_cpu: measure each process's CPU over the steady window (paced runs only).
        nice_source: run the source niced, as the pipeline's capacity runs run theirs.
        journal: every relay keeps a bare journal (``bench/shape.py``'s bare journal) in a temporary
            directory, as every adapter of a journaling pipeline keeps one.
        hold: the held model (0: not): every relay but the first forwards in releases, once
            every ``hold`` seconds (the adapters' heartbeat interval, as a backup's output
            gate releases at each report of the active). Not with ``journal``.
        timeout: seconds of silence, or of waiting for a process, before giving up.
    """

    relays: int
    count: int
    rate: float = 0.0
    size: int = DEFAULT_SIZE
    batch: int = MAX_BATCH
    latency: bool = False
    measure_cpu: bool = False
    nice_source: bool = False
    journal: bool = False
    hold: float = 0.0
    timeout: float = 60.0

    def __post_init__(self) -> None:
        if self.relays < 1:
            raise ValueError(f"relays must be >= 1, got {self.relays}")
        if self.size < STAMP.size:
            raise ValueError(f"size must be >= {STAMP.size}, got {self.size}")
        if self.count < 1 or self.batch < 1:
            raise ValueError(f"count and batch must be >= 1, got {self.count}, {self.batch}")
        check_hold(self.hold, self.journal)


def run_shape(options: ShapeOptions, log: IO[str] | None = None) -> dict[str, Any]:
    """Run the bare model once in child processes (see the module doc).

    Args:
        options: the run.
        log: where the children's stderr goes.

    Returns:
        ``sent``, ``delivered``, ``lost`` (gaps, and what never arrived), ``duplicates``,
        ``rate`` (the client's delivered msg/s, first to last delivery), ``span_s`` (first to
        last delivery), ``relays``,
        ``size``; with ``latency`` ``latency_us``; with ``measure_cpu`` ``cpu``
        (:func:`feedha.bench.cpu.steady_window`); with ``journal`` ``journaled``, the bytes
        each relay wrote and synced; with ``hold`` ``hold_s`` and ``releases``, how many
        releases each relay made (0 for the first, which forwards at once).

    Raises:
        feedha.procs.ProcessError: a process did not start or report in time.
    """
    from feedha.procs import SOURCE_NICE, JsonProcess

    module, common = "feedha.bench.shape", ["--size", str(options.size)]
    source = JsonProcess.python(
        "shape-source",
        module,
        ["source", "--count", str(options.count), "--rate", str(options.rate),
         "--batch", str(options.batch), "--wait", str(options.timeout), *common],
        log=log,
        nice=SOURCE_NICE if options.nice_source else 0,
    )  # fmt: skip
    procs = [source]
    journals = tempfile.TemporaryDirectory(prefix="feedha-bench-shape-journals-") if options.journal else None
    try:
        endpoint = source.wait_event("ready", 20)["endpoint"]
        relays = _start_relays(options, endpoint, journals.name if journals is not None else None, log, procs)
        lines = [relay.wait_event("ready", 20)["endpoint"] for relay in relays]
        argv = ["client", *(f"--endpoint={line}" for line in lines), *common]
        argv += ["--latency"] if options.latency else []
        client = JsonProcess.python("shape-client", module, argv, log=log)
        procs.append(client)
        client.wait_event("ready", 20)
        source.popen.send_signal(signal.SIGUSR1)
        cpu = (
            _steady_cpu(options, source, relays, client) if options.measure_cpu and options.rate > 0 else None
        )
        wait = options.timeout + (options.count / options.rate if options.rate > 0 else 0)
        done = source.wait_event("done", wait)
        result = client.wait_event("result", options.timeout + 5)
        relays_done = (
            [relay.wait_event("done", options.timeout + 5) for relay in relays]
            if journals is not None or options.hold
            else None
        )
    finally:
        for proc in procs:
            proc.kill()
        if journals is not None:
            journals.cleanup()
    return _measured(options, done, result, relays_done, cpu)


def _start_relays(
    options: ShapeOptions, endpoint: str, journals: str | None, log: IO[str] | None, procs: list[Any]
) -> list[Any]:
    # One relay per adapter on the source's endpoint: the backups' held with `hold`, each with a
    # bare journal in `journals` when given; each added to `procs` as it starts.
    from feedha.procs import JsonProcess

    relays = []
    for number in range(1, options.relays + 1):
        argv = ["relay", "--endpoint", endpoint]
        if options.hold and number > 1:  # the backups' relays
            argv += ["--hold", str(options.hold)]
        if journals is not None:
            argv += ["--journal", os.path.join(journals, f"relay-{number}.journal")]
        relays.append(JsonProcess.python(f"shape-relay-{number}", "feedha.bench.shape", argv, log=log))
        procs.append(relays[-1])
    return relays


def _steady_cpu(options: ShapeOptions, source: Any, relays: list[Any], client: Any) -> dict[str, Any]:
    # Each process's CPU per message over the steady window of a paced run.
    from feedha.bench.cpu import steady_window

    pids = {"source": source.popen.pid, "client": client.popen.pid}
    pids |= {f"relay-{n}": relay.popen.pid for n, relay in enumerate(relays, start=1)}
    return steady_window(
        pids,
        rate=options.rate,
        seconds=options.count / options.rate,
        flowing=lambda: (client.last("progress") or {}).get("delivered", 0) > 0,
    )


def _measured(
    options: ShapeOptions,
    done: dict[str, Any],
    result: dict[str, Any],
    relays_done: list[dict[str, Any]] | None,
    cpu: dict[str, Any] | None,
) -> dict[str, Any]:
    # What run_shape returns, from the source's, the client's and the relays' reports.
    span = (result["last_ns"] - result["first_ns"]) / 1e9
    out: dict[str, Any] = {
        "sent": done["sent"],
        "send_s": round(done["elapsed_s"], 3),
        "delivered": result["delivered"],
        "duplicates": result["duplicates"],
        "lost": result["gaps"] + max(0, done["sent"] - result["last_seq"]),
        "rate": result["delivered"] / span if span > 0 and result["delivered"] > 1 else 0.0,
        "span_s": round(span, 3),
        "relays": options.relays,
        "size": options.size,
    }
    if options.latency:
        out["latency_us"] = result["latency_us"]
    if cpu is not None:
        out["cpu"] = cpu
    if options.journal and relays_done is not None:
        out["journaled"] = [done["journaled"] for done in relays_done]
    if options.hold and relays_done is not None:
        out["hold_s"] = options.hold
        out["releases"] = [done["releases"] for done in relays_done]
    return out
