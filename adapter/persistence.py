"""The adapter's journal files: where the core's journal actions are written, and what recovery reads.

:class:`JournalKeeper` is part of the runner's shell. It owns the journal
writer (group commit, segments, checkpoints, retention) and the replay
service that answers from it (on its own thread, :mod:`adapter.replay_server`).
The decisions -- which records, when a checkpoint -- are the core's
(:mod:`adapter.core.journaling`).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from feedha.adapter.access import LINE, REPLAY, SNAPSHOT
from feedha.adapter.config import AdapterConfig
from feedha.adapter.core import AdapterCore, CoreView, JournalControl, JournalRecords, WriteCheckpoint
from feedha.adapter.core.purge import PurgeTable
from feedha.adapter.journal import JournalConfig, JournalReader, JournalWriter, Record
from feedha.adapter.journal.checkpoint import CheckpointStore
from feedha.adapter.journal.reader import Tail
from feedha.adapter.journal.segment import list_segments
from feedha.adapter.journal.term import read_term, write_term
from feedha.adapter.replay import ReplayLimits, ReplayService
from feedha.adapter.replay_server import FlushGate, ReplayServer
from feedha.adapter.snapshot import ImageBuilder
from feedha.adapter.snapshot_server import SnapshotLoop
from feedha.adapter.zap import DataPlaneGuard

if TYPE_CHECKING:
    from feedha.adapter.journal._reference import Appender

logger = logging.getLogger(__name__)


class JournalKeeper:
    """The journal and replay service of one adapter (``--journal`` given).

    Args:
        config: the adapter's configuration; ``journal_dir`` must be set.

    Raises:
        ValueError: ``config.journal_dir`` is not set.
    """

    def __init__(self, config: AdapterConfig, guard: DataPlaneGuard | None = None) -> None:
        if config.journal_dir is None:
            raise ValueError("JournalKeeper needs config.journal_dir")
        self._config = config
        self._dir = config.journal_dir
        self._guard = guard
        self.writer: JournalWriter | None = None
        self.replay: ReplayServer | None = None
        self.snapshots: SnapshotLoop | None = None
        self._tail: Tail | None = None  # the delayed line's reader
        self.flush_gate = FlushGate(self._write_soon)  # the replay thread's, never the loop's
        self.view: CoreView | None = None  # the core's frozen view, handed over by the loop (term, purges)

    def __repr__(self) -> str:
        last = None if self.writer is None else self.writer.last_msg_seq
        return f"<JournalKeeper [dir={self._dir}, last_msg_seq={last}, replay={self.replay!r}]>"

    def open(self, core: AdapterCore) -> dict[str, Any]:
        """Open the journal (cutting a torn tail), let ``core`` recover from it, start the replay service.

        Returns:
            The fields of the ``recovered`` status event.
        """
        cfg = self._config
        writer = self.writer = JournalWriter(
            self._dir,
            JournalConfig(
                fsync=cfg.journal_fsync,
                retention_max_age_s=cfg.retention_max_age_s,
                retention_max_bytes=cfg.retention_max_bytes,
            ),
        )
        delay_ns = None if cfg.delayed_line_endpoint is None else round(cfg.delay_s * 1e9)
        summary = core.recover(
            writer.latest_checkpoint(),
            JournalReader(self._dir),
            journal_last_msg_seq=max(writer.last_msg_seq, 0),
            term=read_term(self._dir),
            # After a restart, what was due on the delayed line while it was down is not sent again.
            delayed_from=None
            if delay_ns is None
            else JournalReader(self._dir).seek_time(time.time_ns() - delay_ns, writer.time_index),
        )
        self.view = core.view()
        if cfg.replay_endpoint:
            self._start_replay(cfg.replay_endpoint, delay_ns)
        if cfg.snapshot_endpoint:
            self._start_snapshots(cfg.snapshot_endpoint)
        report = writer.recovery_report
        return {
            **summary.as_dict(),
            "journal_cut_bytes": report.bytes_cut,
            "journal_cut_reason": report.reason,
        }

    def _start_replay(self, endpoint: str, delay_ns: int | None) -> None:
        cfg, guard = self._config, self._guard
        service = ReplayService(
            JournalReader(self._dir),
            channel=cfg.channel_number,
            adapter=cfg.adapter,
            max_packet_bytes=cfg.max_packet_bytes,
            max_bytes=cfg.replay_max_bytes,
            bounds=self._bounds,
            before_read=self._ask_flush,
            images=self._images(),
            purges=self._purges,
            delay_ns=delay_ns,
            time_index=None if self.writer is None else self.writer.time_index.start_for,
        )
        self.replay = ReplayServer(
            endpoint,
            service,
            self._term,
            ReplayLimits(),
            secure=None if guard is None else guard.secure,
            delayed_only=None if guard is None or guard.keys is None else guard.is_delayed_only,
            peers=None if guard is None or guard.keys is None else guard.books[REPLAY],
            owner_of=None if guard is None or guard.keys is None else guard.owner_of,
        )
        self.replay.start()

    def _start_snapshots(self, endpoint: str) -> None:
        cfg, guard = self._config, self._guard
        self.snapshots = SnapshotLoop(
            endpoint,
            self._images(),
            topic=cfg.channel.encode(),
            interval_s=cfg.snapshot_interval_s,
            secure=None if guard is None else lambda sock: guard.secure(sock, SNAPSHOT),
            serve=None if guard is None else lambda sock, now: guard.serve(SNAPSHOT, sock, now=now),
        )
        self.snapshots.start()

    def _images(self) -> ImageBuilder:
        # One builder per thread that serves images (the replay service, the snapshot loop).
        cfg = self._config
        store = CheckpointStore(self._dir)
        return ImageBuilder(
            JournalReader(self._dir),
            store.latest,
            channel=cfg.channel_number,
            adapter=cfg.adapter,
            book_depth=cfg.book_depth,
        )

    @property
    def appender(self) -> Appender:
        """The writer's live tail: the source pump appends each packet's records to it (in C)."""
        assert self.writer is not None, "the journal is opened before the pump is made"
        return self.writer.appender

    def append(self, records: JournalRecords) -> None:
        """Write published messages into the group-commit buffer (no system call)."""
        assert self.writer is not None
        if records.flags:  # an end-of-session record: one, rare, on the writer's slow path
            for i, (seq, payload) in enumerate(zip(records.source_seqs, records.payloads, strict=True)):
                self.writer.append(
                    records.first_msg_seq + i,
                    records.time_ns,
                    records.source_stream,
                    seq,
                    payload,
                    records.flags,
                )
            return
        self.writer.append_batch(
            records.first_msg_seq,
            records.time_ns,
            records.source_stream,
            records.source_seqs,
            records.payloads,
        )

    def append_control(self, action: JournalControl) -> None:
        """Write a control record (a purge) into the group-commit buffer."""
        assert self.writer is not None
        self.writer.append_control(action.flags, action.time_ns, action.payload)

    def read_delayed(self, from_seq: int) -> tuple[list[Record], bool]:
        """The next records for the delayed line from ``from_seq`` (a bounded batch); whether that is all."""
        if self._tail is None or self._tail.next_seq != from_seq:
            if self._tail is not None:
                self._tail.close()
            self._tail = JournalReader(self._dir).tail(from_seq)
        return self._tail.poll()

    def checkpoint(self, checkpoint: WriteCheckpoint) -> None:
        """Write a checkpoint, then apply retention (recovery never needs a segment deleted after one)."""
        assert self.writer is not None
        self.writer.write_checkpoint(checkpoint.msg_seq, checkpoint.state)
        cfg = self._config
        if cfg.retention_max_age_s is not None or cfg.retention_max_bytes is not None:
            self.writer.apply_retention(now_ns=time.time_ns())

    def record_term(self, term: int) -> None:
        """Keep the highest term known, for a restart (fsync'd: terms grow rarely)."""
        write_term(self._dir, term)

    def rebind(self, where: str) -> None:
        """A revoked key was connected to ``where``: bind the sockets that serve it afresh."""
        if where == LINE and self.snapshots is not None:
            self.snapshots.rebind()  # the snapshot line serves the line's subscribers
        elif where == REPLAY and self.replay is not None:
            self.replay.rebind()

    def served(self) -> dict[str, int]:
        """The replay service's counters for the adapter's status (none before it started)."""
        served: dict[str, int] = {} if self.snapshots is None else self.snapshots.status()
        if self.replay is None:
            return served
        return {
            **served,
            "replay_requests": self.replay.requests,
            "replay_refused": self.replay.refused,
            "replay_flushes": self.flush_gate.asked,
        }

    def close(self) -> None:
        if self.snapshots is not None:
            self.snapshots.stop()
        if self._tail is not None:
            self._tail.close()
        if self.replay is not None:
            self.replay.stop()
        if self.writer is not None:
            self.writer.close()

    def _term(self) -> int:
        view = self.view  # one read: the loop hands a new view over in one assignment
        return 0 if view is None else view.term

    def _purges(self) -> PurgeTable:
        view = self.view
        return PurgeTable() if view is None else view.purges

    def _bounds(self) -> tuple[int, int]:
        """(oldest, newest) msg_seq in the journal, (0, 0) when empty."""
        assert self.writer is not None
        newest = max(self.writer.last_msg_seq, 0)
        segments = list_segments(self._dir)
        return (segments[0].first_seq if segments and newest else 0), newest

    def _ask_flush(self, last_seq: int) -> None:
        # On the replay thread: records still in the group-commit buffer are invisible to
        # readers; the writer's flusher thread writes them (the adapter's loop never waits).
        self.flush_gate.ask(now=time.monotonic())

    def _write_soon(self, timeout: float) -> bool:
        return self.writer is not None and self.writer.write_soon(timeout=timeout)
