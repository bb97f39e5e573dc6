"""A hole a retransmission is still shrinking is asked for again when it comes of age, not lost.

One call of the replay hook fills what the services give within its budget: under load,
about 15,000 ITCH messages of a 71,000-message hole the lines dropped for a stalled client
(measured: the rest was lost a second later). Now the hole's remainder is asked for again
while each call brings some of it, and lost only once a call brings none.
"""

from __future__ import annotations

import pytest

from feedha.client.events import GapLost, RetransmissionNeeded
from feedha.proto.wire import FLAG_RETRANSMISSION
from tests.unit.client_lib.test_arbiter import CHANNEL, arbiter, packet, seqs


def test_a_hole_a_fill_shrank_is_asked_again_and_lost_only_once_a_call_brings_none() -> None:
    arb = arbiter(fill_timeout=0.05, loss_timeout=0.5)
    arb.on_packet(0, packet(1), now=10.0)
    arb.on_packet(0, packet(101), now=10.0)  # 2..100 missing
    assert arb.on_timer(now=10.05) == [RetransmissionNeeded(CHANNEL, 2, 100)]
    # The first call brings 2..40: delivered; the rest is asked for again when its time comes.
    assert seqs(arb.on_packet(0, packet(2, 39, flags=FLAG_RETRANSMISSION), now=10.1)) == list(range(2, 41))
    assert arb.on_timer(now=10.5) == [RetransmissionNeeded(CHANNEL, 41, 100)]
    assert arb.next_deadline() == pytest.approx(11.0)  # a fresh loss_timeout
    # The second call brings 41..70; the third nothing: 71..100 is lost, and 101 delivered.
    arb.on_packet(0, packet(41, 30, flags=FLAG_RETRANSMISSION), now=10.6)
    assert arb.on_timer(now=11.0) == [RetransmissionNeeded(CHANNEL, 71, 100)]
    out = arb.on_timer(now=11.5)
    assert out[0] == GapLost(CHANNEL, 71, 100) and seqs(out) == [101]
    stats = arb.stats()
    assert stats.lost == 30 and stats.retransmission_requests == 3


def test_a_live_copy_does_not_keep_a_hole_open() -> None:
    # Only a retransmission counts as a fill in progress: a line's late copy does not.
    arb = arbiter(fill_timeout=0.05, loss_timeout=0.5)
    arb.on_packet(0, packet(1), now=10.0)
    arb.on_packet(0, packet(11), now=10.0)  # 2..10 missing
    assert arb.on_timer(now=10.05) == [RetransmissionNeeded(CHANNEL, 2, 10)]
    arb.on_packet(1, packet(5, adapter=2), now=10.1)  # one live copy inside the hole
    out = arb.on_timer(now=10.5)
    assert [e for e in out if isinstance(e, GapLost)] == [GapLost(CHANNEL, 2, 4), GapLost(CHANNEL, 6, 10)]
    assert not any(isinstance(e, RetransmissionNeeded) for e in out)
