"""The adapter's journal: append what is published, checkpoint, recover, serve replays.

:class:`JournalKeeper` owns the journal writer and the replay service of one
adapter. The runner calls :meth:`JournalKeeper.append` for every message it
publishes (the append only frames the record into the group-commit buffer,
no system call), :meth:`maybe_checkpoint` between batches, and
:meth:`serve` when its replay socket is readable. At start-up
:meth:`JournalKeeper.open` cuts a torn tail and rebuilds the numbering and the
conversion state from the newest checkpoint plus the records after it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

import zmq

from adapter import recovery
from adapter.config import AdapterConfig
from adapter.journal import JournalConfig, JournalReader, JournalWriter
from adapter.journal.segment import list_segments
from adapter.replay import ReplayService
from adapter.sequencer import Sequencer
from adapter.state import ConversionState

logger = logging.getLogger(__name__)

REPLAY_REQUESTS_PER_WAKEUP = 8


class JournalKeeper:
    """Journal, checkpoints and replay service of one adapter (``--journal`` given).

    Args:
        config: the adapter's configuration; ``journal_dir`` must be set.
        conversion: the adapter's conversion state (read for checkpoints, rebuilt on recovery).
        sequencer: the adapter's sequencer (rebuilt on recovery).
        counters: the runner's counters, updated in place.
        status: the runner's status sink, for the ``recovered`` event.
    """

    def __init__(
        self,
        config: AdapterConfig,
        conversion: ConversionState,
        sequencer: Sequencer,
        counters: dict[str, int],
        status: Callable[..., None],
    ) -> None:
        if config.journal_dir is None:
            raise ValueError("JournalKeeper needs config.journal_dir")
        self._config = config
        self._dir = config.journal_dir
        self._conversion = conversion
        self._sequencer = sequencer
        self._counters = counters
        self._status = status
        self.writer: JournalWriter | None = None
        self.replay: ReplayService | None = None
        self.recovered: recovery.RecoverySummary | None = None
        self._journaled_source_seq = 0  # source_seq of the last journaled message
        self._since_checkpoint = 0
        self._checkpoint_at = time.monotonic()

    def __repr__(self) -> str:
        last = None if self.writer is None else self.writer.last_msg_seq
        pending = self._since_checkpoint
        return f"<JournalKeeper [dir={self._dir}, last_msg_seq={last}, since_checkpoint={pending}]>"

    @property
    def last_msg_seq(self) -> int | None:
        return None if self.writer is None else self.writer.last_msg_seq

    def open(self) -> None:
        """Open the journal (cutting a torn tail) and recover numbering and state from it."""
        cfg = self._config
        writer = self.writer = JournalWriter(
            self._dir,
            JournalConfig(
                fsync=cfg.journal_fsync,
                retention_max_age_s=cfg.retention_max_age_s,
                retention_max_bytes=cfg.retention_max_bytes,
            ),
        )
        report = writer.recovery_report
        summary = recovery.recover_state(
            JournalReader(self._dir), writer.latest_checkpoint(), self._conversion, self._sequencer
        )
        self.recovered = summary
        self._journaled_source_seq = summary.last_source_seq
        self._status(
            "recovered",
            **summary.as_dict(),
            journal_cut_bytes=report.bytes_cut,
            journal_cut_reason=report.reason,
        )
        if cfg.replay_endpoint:
            self.replay = ReplayService(
                JournalReader(self._dir),
                channel=cfg.channel_number,
                adapter=cfg.adapter,
                max_packet_bytes=cfg.max_packet_bytes,
                max_bytes=cfg.replay_max_bytes,
                bounds=self._bounds,
                before_read=self._flush_for,
            )

    def append(self, msg_seq: int, time_ns: int, source_seq: int, payload: bytes) -> None:
        """Journal one published message."""
        writer = self.writer
        assert writer is not None
        if msg_seq <= writer.last_msg_seq:
            # Renumbered backwards (rule 2 after an episode of bad numbering):
            # the journal keeps one record per msg_seq, the first one written.
            self._counters["journal_skipped"] += 1
            return
        writer.append(msg_seq, time_ns, self._config.source_stream_number, source_seq, payload)
        self._counters["journaled"] += 1
        self._journaled_source_seq = source_seq
        self._since_checkpoint += 1

    def append_batch(
        self, first_msg_seq: int, time_ns: int, source_seqs: Sequence[int], payloads: Sequence[bytes]
    ) -> None:
        """Journal published messages ``first_msg_seq``, ``first_msg_seq + 1``, ... (one C call for most).

        Args:
            first_msg_seq: msg_seq of the first message.
            time_ns: their publish time, ns since the Unix epoch.
            source_seqs: each message's source_seq (a list or an ``array.array('q')``).
            payloads: each message's encoded ``MarketUpdate``, as many as ``source_seqs``.

        Raises:
            ValueError: the lengths differ.
        """
        writer = self.writer
        assert writer is not None
        count = len(payloads)
        if len(source_seqs) != count:
            raise ValueError(f"source_seqs and payloads differ in length: {len(source_seqs)} != {count}")
        if not count:
            return
        # As append() per message: numbers already journaled (renumbered
        # backwards by rule 2) keep their first record and are skipped.
        skip = min(max(writer.last_msg_seq - first_msg_seq + 1, 0), count)
        if skip:
            self._counters["journal_skipped"] += skip
            if skip == count:
                return
            first_msg_seq += skip
            source_seqs, payloads = source_seqs[skip:], payloads[skip:]
        try:
            writer.append_batch(
                first_msg_seq, time_ns, self._config.source_stream_number, source_seqs, payloads
            )
        finally:
            # On an error the records before the bad one are journaled: count them.
            journaled = max(writer.last_msg_seq - first_msg_seq + 1, 0)
            if journaled:
                self._counters["journaled"] += journaled
                self._journaled_source_seq = source_seqs[journaled - 1]
                self._since_checkpoint += journaled

    def maybe_checkpoint(self, now: float) -> None:
        """Write a checkpoint when one is due and the state is exactly the journal's."""
        # A checkpoint is the conversion state *at* the last journaled message,
        # so it is taken only when nothing was converted after that message.
        writer = self.writer
        assert writer is not None
        cfg = self._config
        due = self._since_checkpoint >= cfg.checkpoint_every or (
            self._since_checkpoint and now - self._checkpoint_at >= cfg.checkpoint_interval_s
        )
        if not due or self._journaled_source_seq != self._sequencer.last_source_seq:
            return
        blob = recovery.encode_checkpoint_state(
            self._conversion.snapshot(),
            source_stream=cfg.source_stream_number,
            source_seq=self._journaled_source_seq,
            next_msg_seq=writer.last_msg_seq + 1,
        )
        writer.write_checkpoint(writer.last_msg_seq, blob)
        self._since_checkpoint = 0
        self._checkpoint_at = time.monotonic()
        self._counters["checkpoints"] += 1
        # Retention runs here, after a checkpoint, so recovery never needs a deleted segment.
        if cfg.retention_max_age_s is not None or cfg.retention_max_bytes is not None:
            writer.apply_retention(now_ns=time.time_ns())

    def serve(self, socket: zmq.Socket[bytes], *, term: int) -> None:
        """Answer the replay requests waiting on ``socket`` (a bounded number per call)."""
        assert self.replay is not None
        # Bounded per wake-up, so replay never starves the source or the sync bus.
        for _ in range(REPLAY_REQUESTS_PER_WAKEUP):
            try:
                frames = socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self._counters["replay_requests"] += 1
            socket.send_multipart(self.replay.answer(frames, term=term, send_time_ns=time.time_ns()))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

    def _bounds(self) -> tuple[int, int]:
        """(oldest, newest) msg_seq in the journal, (0, 0) when empty."""
        assert self.writer is not None
        newest = max(self.writer.last_msg_seq, 0)
        segments = list_segments(self._dir)
        return (segments[0].first_seq if segments and newest else 0), newest

    def _flush_for(self, last_seq: int) -> None:
        # Records still in the group-commit buffer are invisible to readers;
        # write them out (no fsync needed: readers see written bytes).
        assert self.writer is not None
        self.writer.flush(sync=False)
