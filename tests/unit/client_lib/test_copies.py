"""The delivered ring's runs against the same ring fed one message at a time.

:meth:`DeliveredRing.remember_run` writes with slice assignments (one message
without slices) and :meth:`DeliveredRing.holds_run` compares slices; the
reference is :meth:`DeliveredRing.remember` and :meth:`DeliveredRing.identity`,
one ``msg_seq`` at a time. Runs wrap around the ring, are longer than it, are
one message, and have gaps between them.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.client._copies import DeliveredRing

WINDOW = 8

identity = st.tuples(st.integers(0, 3), st.integers(0, 5))
run = st.lists(identity, min_size=1, max_size=2 * WINDOW + 3)


def _split(ids: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    return [stream for stream, _ in ids], [source_seq for _, source_seq in ids]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), run), min_size=1, max_size=12), st.lists(run, max_size=6))
def test_runs_remember_and_compare_as_one_message_at_a_time_does(
    steps: list[tuple[int, list[tuple[int, int]]]], probes: list[list[tuple[int, int]]]
) -> None:
    ring, reference = DeliveredRing(WINDOW), DeliveredRing(WINDOW)
    seq = 1
    for skip, ids in steps:  # delivered in order, with gaps between runs
        seq += skip
        ring.remember_run(seq, *_split(ids))
        for offset, (stream, source_seq) in enumerate(ids):
            reference.remember(seq + offset, stream, source_seq)
        seq += len(ids)
    for probe_seq in range(max(1, seq - 3 * WINDOW), seq + 2):
        assert ring.identity(probe_seq) == reference.identity(probe_seq)
    for first in range(max(1, seq - WINDOW - 2), seq):
        known = [reference.identity(first + i) for i in range(3)]
        true_runs = [[known[0]], known] if None not in known else [[known[0]]] if known[0] else []
        for ids in [*probes, *true_runs]:
            expected = all(reference.identity(first + i) == ident for i, ident in enumerate(ids))
            held = ring.holds_run(first, *_split(ids))
            # a run that wraps the ring's end is declined (its callers then check one by one)
            assert held == (expected and (first % WINDOW) + len(ids) <= WINDOW)
