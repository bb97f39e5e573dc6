"""The drills' delayed-delivery timing (feedha/drills/client.py): early deliveries counted and described."""

from __future__ import annotations

from feedha.drills.client import EARLY_KEPT, DelayedTiming

DELAY_NS = 5_000_000_000


def test_a_delivery_before_its_time_is_counted_and_described() -> None:
    timing = DelayedTiming(DELAY_NS)
    event = 1_000_000_000_000
    timing.on_delivery(event, event + DELAY_NS + 1_500_000, msg_seq=1, line=0, send_time_ns=event + DELAY_NS)
    timing.on_delivery(
        event, event + DELAY_NS - 885, msg_seq=2, line=2, send_time_ns=event + DELAY_NS - 307_530
    )
    summary = timing.summary()
    assert summary["early"] == 1
    assert summary["early_examples"] == [
        {"msg_seq": 2, "line": 2, "early_ns": 885, "sent_after_due_ns": -307_530}
    ]
    assert summary["overshoot_ms_p99"] == 1.5


def test_early_examples_are_bounded() -> None:
    timing = DelayedTiming(DELAY_NS)
    for seq in range(EARLY_KEPT * 3):
        timing.on_delivery(DELAY_NS, DELAY_NS, msg_seq=seq)  # due at 2 * DELAY_NS: early
    assert timing.early == EARLY_KEPT * 3 and len(timing.summary()["early_examples"]) == EARLY_KEPT
