"""A forger's high terms on every line fence nothing; a genuine promotion is still followed at once.

Three real adapters; the subscriber (the client library) reads them through
relays on which a forger puts a copy of the newest genuine packet with a
high term (2^32-1, term + 1, term + 1000) on every line at once, five times
a second (``feedha.drills.abuse_terms.ForgedLines``: what a holder of a sealed
channel's packet key can do). Midway the active is killed: its backups
promote one of them, and the subscriber is told the new term as a route
update would tell it (the lines the forger sent on are distrusted by then:
while it sends, only the routes confirm a term). The subscriber starts from
the term its routes carry (1), must deliver every message the source sent,
and must end on the genuine term the adapters report -- never a forged one.
"""

from __future__ import annotations

import time

import pytest

from feedha.client import ChannelSpec, Delivery, Subscriber, TermChanged
from feedha.drills.abuse_terms import ForgedLines, forged
from feedha.proto import wire
from tests.integration.groups import running_group

CHANNEL = "EQ-A-Z"


def test_forged_copies_keep_the_blocks_and_change_the_term_and_adapter() -> None:
    genuine = wire.encode_packet(
        channel=1, adapter=2, term=3, first_seq=10, blocks=[(1, 5, b"x")], send_time_ns=7
    )
    header, blocks = wire.decode_packet(forged(genuine, 2**32 - 1))
    assert (header.term, header.adapter, header.first_seq, header.send_time_ns) == (2**32 - 1, 9, 10, 7)
    assert [(b.msg_seq, b.source_seq, b.payload) for b in blocks] == [(10, 5, b"x")]


@pytest.mark.timeout(120)
def test_a_forger_on_every_line_fences_nothing_and_a_real_promotion_is_followed() -> None:
    with running_group(channel=CHANNEL, channel_number=1, size=3, rate=2000, seconds=6) as group:
        for number in (1, 2, 3):
            group.start_adapter(number, active=number == 1)
        lines = [(group.plan.adapter(n).line, "") for n in (1, 2, 3)]
        relays = ForgedLines(lines, CHANNEL, None)
        relays.start()
        changes: list[tuple[int, int, int]] = []
        delivered: list[int] = []
        try:
            spec = ChannelSpec(CHANNEL, 1, tuple(relays.endpoints), term=1)
            with Subscriber([spec]) as subscriber:
                source = group.start_source()
                killed = told = False
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    alive = source.alive
                    events = subscriber.poll(0.05 if alive else 0.5)
                    delivered += [e.source_seq for e in events if isinstance(e, Delivery)]
                    changes += [
                        (e.old_term, e.new_term, e.line) for e in events if isinstance(e, TermChanged)
                    ]
                    if not killed and len(delivered) > 4000:  # midway: the active dies
                        group.adapters[1].kill()
                        killed = True
                    if killed and not told and any(group.status(n)["role"] == "active" for n in (2, 3)):
                        subscriber.join(
                            ChannelSpec(CHANNEL, 1, tuple(relays.endpoints), term=2)
                        )  # the routes
                        told = True
                    if not alive and not events:
                        break
                stats = subscriber.stats()[CHANNEL]
            sent = group.sent()
            terms = {group.status(n)["term"] for n in (2, 3)}
        finally:
            forger = relays.stop()
    assert killed and told and forger["forged"] > 30, forger
    assert delivered == list(range(1, sent + 1))  # every message, in order, once
    assert terms == {2} and stats.highest_term == 2 and stats.lost == 0, (stats, changes)
    # Followed at the genuine promotion; a forged term the lines followed a moment was taken back.
    assert any(new == 2 for _old, new, _line in changes), changes
