"""``feedha drill book``: a captured feed through an active and its backups, the active killed midway.

The capture (``--file``, ``--format fix44`` or ``itch50``) is played by ``feedha source
--file`` at a set rate (never by its timestamps, so the kill lands at the
same message every run); the adapters convert it into order books; a client
on every line keeps the books. Midway the active is SIGKILLed. The summary
is one JSON object with exactly these keys: ``sent`` (capture messages
played), ``delivered`` (market-data messages the client got), ``lost``
(messages the surviving adapters numbered that the client never got),
``line_holes``, ``conflicts``, ``quarantined`` (malformed messages, as the
surviving adapters counted them), and the client's final ``books`` and
``stats`` per symbol.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from feedha.cluster import control
from feedha.drill import (
    CHANNEL,
    Drill,
    DrillOptions,
    drain_client,
    place_local,
    show_progress,
    start_drill,
    victim,
)
from feedha.plain_source.capture import read_capture
from feedha.plain_source.itch50_playback import read_itch_capture
from feedha.procs import ProcessError

__all__ = ["BookDrillOptions", "run_book"]

KEYS = ("sent", "delivered", "lost", "line_holes", "conflicts", "quarantined", "books", "stats")


@dataclass(frozen=True)
class BookDrillOptions:
    """What ``feedha drill book`` runs."""

    file: Path
    input_format: str = "fix44"
    rate: float = 2000.0
    backups: int = 2
    depth: int = 10
    kill: str = "active"  # active | backup | none
    kill_at: float = 0.5


def run_book(options: BookDrillOptions, log: IO[str]) -> dict[str, Any]:
    """Run the drill and return its summary (the keys of :data:`KEYS`); tears down what it built."""
    data = options.file.read_bytes()
    capture = read_itch_capture(data) if options.input_format == "itch50" else read_capture(data)
    count = len(capture.messages)
    base = DrillOptions(
        backups=options.backups,
        rate=options.rate,
        seconds=count / options.rate,
        kill=options.kill,
        kill_at=options.kill_at,
        extra_adapter_args=["--format", options.input_format, "--book-depth", str(options.depth)],
        # The capture is played whole (its length bounds the source); --seconds, which the drill
        # also uses to time the kill, only guards: a source late on a loaded machine cut the tail off.
        extra_source_args=[
            "--file",
            str(options.file),
            "--format",
            options.input_format,
            "--seconds",
            f"{4 * count / options.rate + 60:g}",
        ],
        extra_client_args=["--books", str(options.depth)],
    )
    placement = place_local(base)
    drill: Drill | None = None
    try:
        drill = start_drill(base, log, placement)
        return _drive(drill, options)
    finally:
        if drill is not None:
            for proc in drill.all():
                proc.kill()
        if placement.journal_root is not None:
            shutil.rmtree(placement.journal_root, ignore_errors=True)


def _drive(drill: Drill, options: BookDrillOptions) -> dict[str, Any]:
    assert drill.source is not None and drill.client is not None
    started = time.monotonic()
    kill_after = drill.options.seconds * options.kill_at
    killed = options.kill == "none"
    while drill.source.alive:
        if not killed and time.monotonic() - started >= kill_after:
            killed = True
            number = victim(drill, options.kill)
            drill.adapters[number].kill()
        show_progress(f"drill book: {time.monotonic() - started:5.1f}s")
        try:
            drill.source.popen.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            pass
    source = drill.source.wait_for(lambda e: "sent" in e, 30)
    numbered, quarantined = _survivors(drill)
    drain_client(drill.client, numbered)
    drill.client.stop()
    summary = drill.client.wait_event("summary", 10)["channels"][CHANNEL]
    for proc in drill.adapters.values():
        if proc.alive:
            proc.stop()
    show_progress("")
    arbiter = summary["arbiter"]
    return {
        "sent": int(source["sent"]),
        "delivered": int(summary["delivered"]),
        "lost": max(0, numbered - int(summary["unique"])),
        "line_holes": int(arbiter.get("line_holes", 0)),
        "conflicts": int(arbiter.get("conflicts", 0)),
        "quarantined": quarantined,
        "books": summary.get("books", {}),
        "stats": summary.get("stats", {}),
    }


def _survivors(drill: Drill) -> tuple[int, int]:
    """(msg_seqs the surviving adapters numbered, messages they quarantined), once they settle."""
    deadline = time.monotonic() + 60.0  # a backup still converting a backlog keeps moving: wait for it
    last: tuple[int, int] | None = None
    while time.monotonic() < deadline:
        seen = []
        for plan in drill.group.adapters:
            proc = drill.adapters.get(plan.adapter)
            if proc is None or not proc.alive:
                continue
            status = control(plan.control, "status", timeout=2.0)
            quarantined = status.get("quarantined") or {}
            assert isinstance(quarantined, dict)
            seen.append(
                (int(str(status.get("next_msg_seq", 1))) - 1, sum(int(v) for v in quarantined.values()))
            )
        if not seen:
            raise ProcessError("no adapter survived")
        now = max(seen)
        if now == last:
            return now
        last = now
        time.sleep(0.3)  # a poll with a deadline: the backups finish converting the tail
    assert last is not None
    return last
