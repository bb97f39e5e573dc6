"""``feedha drill book``: a captured feed through an active and its backups, the active killed midway.

The capture (``--file``, ``--format fix44`` or ``itch50``) is played by ``feedha source
--file`` at a set rate (never by its timestamps, so the kill lands at the
same message every run); the adapters convert it into order books and
journal what their lines carry; a client on every line keeps the books and
fills what no line carried from the journals. Midway the active is SIGKILLed.
The source never runs ahead of the slowest adapter (it waits, and reports
the rate it achieved: ``achieved_rate``). The summary is one JSON object with
exactly these keys: ``sent`` (capture messages played), ``delivered``
(market-data messages the client got), ``lost`` (messages the channel
numbered that the client never got), ``unaccounted`` (messages sent that no
adapter numbered, quarantined, skipped or booked in a source gap:
:mod:`feedha.drills.accounting`), ``source_gaps`` (positions no message came
for), ``line_holes`` (messages no line carried to the client, filled from the
journals), ``conflicts``, ``quarantined`` (malformed messages, as the
surviving adapters counted them), ``skipped`` (messages that are not market
data), ``achieved_rate``, and the client's final ``books`` and ``stats`` per
symbol.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, Any

from feedha.adapter.formats.capture_registry import capture_named, default_capture
from feedha.drills.accounting import settle
from feedha.drills.group import (
    CHANNEL,
    Drill,
    DrillOptions,
    drain_client,
    live_controls,
    place_local,
    sent_of,
    show_progress,
    start_drill,
    victim,
)

__all__ = ["BookDrillOptions", "run_book"]

KEYS = (
    "sent", "delivered", "lost", "unaccounted", "source_gaps", "line_holes", "conflicts", "quarantined",
    "skipped", "achieved_rate", "books", "stats",
)  # fmt: skip


@dataclass(frozen=True)
class BookDrillOptions:
    """What ``feedha drill book`` runs."""

    file: Path
    input_format: str = field(default_factory=lambda: default_capture("book"))
    rate: float = 2000.0
    backups: int = 2
    depth: int = 10
    kill: str = "active"  # active | backup | none
    kill_at: float = 0.5


def run_book(options: BookDrillOptions, log: IO[str]) -> dict[str, Any]:
    """Run the drill and return its summary (the keys of :data:`KEYS`); tears down what it built."""
    data = options.file.read_bytes()
    count = len(capture_named(options.input_format).read(data).messages)
    base = DrillOptions(
        backups=options.backups,
        rate=options.rate,
        seconds=count / options.rate,
        kill=options.kill,
        kill_at=options.kill_at,
        extra_adapter_args=["--format", options.input_format, "--book-depth", str(options.depth)],
        # The capture is played whole (its length bounds the source, which waits for its slowest
        # adapter); --seconds, which the drill also uses to time the kill, only guards a hung run.
        extra_source_args=[
            "--file",
            str(options.file),
            "--format",
            options.input_format,
            "--seconds",
            f"{max(3600.0, 20 * count / options.rate):g}",
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
    # The kill lands at the same message every run: when the client has that far (the source
    # may be held back below --rate by a slower group, so the clock would not say when).
    kill_at = round(options.kill_at * drill.options.seconds * options.rate)
    killed = options.kill == "none"
    started = time.monotonic()
    while drill.source.alive:
        progress = drill.client.last("progress") or {}
        if not killed and int(progress.get("source_seq", 0)) >= kill_at:
            killed = True
            drill.adapters[victim(drill, options.kill)].kill()
        show_progress(
            f"drill book: {time.monotonic() - started:5.1f}s  at {progress.get('source_seq', 0):>9,}"
        )
        try:
            drill.source.popen.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            pass
    source = drill.source.wait_for(lambda e: "sent" in e, 30)
    group = settle(partial(live_controls, drill), *sent_of(source))
    drain_client(drill.client, group.numbered)
    drill.client.stop()
    summary = drill.client.wait_event("summary", 10)["channels"][CHANNEL]
    for proc in drill.adapters.values():
        if proc.alive:
            proc.stop()
    show_progress("")
    arbiter = summary["arbiter"]
    return {
        "sent": group.sent,
        "delivered": int(summary["delivered"]),
        "lost": max(0, group.numbered - int(summary["unique"])),
        "unaccounted": group.unaccounted,
        "source_gaps": group.in_gaps,
        "line_holes": int(arbiter.get("line_holes", 0)),
        "conflicts": int(arbiter.get("conflicts", 0)),
        "quarantined": group.quarantined,
        "skipped": group.skipped,
        "achieved_rate": float(source.get("achieved_rate", 0.0)),
        "books": summary.get("books", {}),
        "stats": summary.get("stats", {}),
    }
