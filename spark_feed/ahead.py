"""Encoding a synthetic batch while Spark collects its row numbers (the driver's two halves, overlapped).

Theory of operation
-------------------
A synthetic micro-batch costs the driver two things in turn: a Spark job
that brings the batch's row numbers over (JVM work: the executors' scan, the
Arrow collect) and the numpy encoding of its messages (Python work). The
``rate-micro-batch`` source gives batch ``b`` the rows ``b*R .. (b+1)*R - 1``,
so the encoding need not wait for them: :class:`Ahead` encodes the first
chunks of that *expected* range on a worker thread while the foreachBatch
thread runs the Spark job, up to :data:`AHEAD_BYTES` of finished messages (so
memory stays bounded whatever the batch size). The rows Spark actually
delivers stay the truth: when they are exactly the expected range the chunks
made ahead are published, otherwise they are thrown away and everything is
encoded from the delivered rows. Nothing is published before the job has
returned, so a batch Spark fails is never half sent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final

import numpy as np
import numpy.typing as npt

from feedha.spark_feed.sink import Encoded
from feedha.spark_feed.synthetic import SyntheticBatches

I64 = npt.NDArray[np.int64]

AHEAD_BYTES: Final = 64 * 1024 * 1024


class Ahead:
    """Makes a synthetic batch's chunks, the first ones while ``collect`` runs (see module doc).

    Args:
        batches: the synthetic market and encoder.
        rows_per_batch: R, the rows of every batch.
        budget_bytes: most bytes of finished messages made ahead.
    """

    def __init__(
        self, batches: SyntheticBatches, rows_per_batch: int, *, budget_bytes: int = AHEAD_BYTES
    ) -> None:
        self._batches = batches
        self._rows = rows_per_batch
        self._budget = budget_bytes
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="encode-ahead")
        self.hits = 0
        self.misses = 0

    def expected(self, batch_id: int) -> I64:
        """The rows the rate source gives batch ``batch_id``: ``batch_id * R`` onwards, ``R`` of them."""
        start = batch_id * self._rows
        return np.arange(start, start + self._rows, dtype=np.int64)

    def chunks(
        self, batch_id: int, base_ns: int, collect: Callable[[], I64]
    ) -> tuple[I64, Iterator[Encoded]]:
        """Run ``collect`` (the Spark job) while the expected rows are encoded.

        Returns:
            The delivered rows, and the batch's chunks: those made ahead when the rows are the
            expected ones, then the rest as they are consumed.
        """
        expected = self.expected(batch_id)
        stop = threading.Event()
        made: Future[list[Encoded]] = self._pool.submit(self._encode_ahead, expected, base_ns, stop)
        try:
            values = collect()
        finally:
            stop.set()
        ahead = made.result()
        if len(values) == len(expected) and np.array_equal(values, expected):
            self.hits += 1
            done = sum(len(chunk) for chunk in ahead)
            rest = self._batches.chunks(values[done:], base_ns=base_ns)
            return values, _chain(ahead, rest)
        self.misses += 1
        return values, self._batches.chunks(values, base_ns=base_ns)

    def _encode_ahead(self, expected: I64, base_ns: int, stop: threading.Event) -> list[Encoded]:
        made: list[Encoded] = []
        size = 0
        for chunk in self._batches.chunks(expected, base_ns=base_ns):
            made.append(chunk)
            size += len(chunk.data)
            if size >= self._budget or stop.is_set():
                break
        return made

    def counts(self) -> dict[str, int]:
        """Batches whose rows were the expected ones (``hits``) and the others (``misses``)."""
        return {"hits": self.hits, "misses": self.misses}

    def close(self) -> None:
        """Stop the worker thread."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __repr__(self) -> str:
        return f"<Ahead [rows_per_batch={self._rows}, hits={self.hits}, misses={self.misses}]>"


def _chain(first: list[Encoded], rest: Iterator[Encoded]) -> Iterator[Encoded]:
    yield from first
    yield from rest
