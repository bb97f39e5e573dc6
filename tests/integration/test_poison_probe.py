"""A hostile source against three adapters without journals, the lines audited by an independent decoder.

The source is the test's own ZeroMQ publisher: normal messages at a steady
rate, and once each, *in place of* a normal message, every poison a broken
or hostile source sends (:data:`feedha.plain_source.frames.POISON_KINDS`) and
a stretch of bytes with no readable position at all. With no journal nothing
fills a hole of the lines afterwards, so every normal message must be on the
union of the three lines. The lines are read with raw SUB sockets and decoded
here with ``struct``, from the layout docs/wire-format.md gives, not with
feedha's own codec.
"""

from __future__ import annotations

import time

import pytest

from feedha.plain_source.frames import POISON_KINDS
from tests.integration.groups import running_group
from tests.integration.probes import CHANNEL, Source, Taps


# Three adapter processes for 20 s (22 s for a 6 s run on the CI machine): with the drills.
@pytest.mark.slow
@pytest.mark.parametrize(("seconds", "rate"), [(20.0, 5000.0)])
def test_poison_in_place_of_messages_costs_no_message_and_no_role_change(seconds: float, rate: float) -> None:
    with running_group(channel=CHANNEL, channel_number=1, size=3, rate=rate, seconds=seconds) as group:
        source = Source(group.source_endpoint, rate=rate, seconds=seconds)
        taps = Taps({n: group.plan.adapter(n).line for n in (1, 2, 3)})
        try:
            group.start_adapter(1, active=True)
            group.start_adapter(2)
            group.start_adapter(3)
            group.wait_status(1, lambda s: s["role"] == "active", 10)
            source.wait_subscribers(3, 20)
            deadline = time.monotonic() + seconds + 60
            while not source.done and time.monotonic() < deadline:
                source.send_due()
                taps.drain(0.5)
            quiet_until = time.monotonic() + 1.0
            while time.monotonic() < quiet_until:  # the tail: until no block came for a second
                if taps.drain(100):
                    quiet_until = time.monotonic() + 1.0
            statuses = [group.status(n) for n in (1, 2, 3)]
            roles = {
                n: [e["new"] for e in proc.events if e.get("event") == "role"]
                for n, proc in group.adapters.items()
            }
            alive = [proc.alive for proc in group.adapters.values()]
        finally:
            taps.close()
            source.close()
    assert source.done
    union: dict[int, int] = {}
    for line in taps.seen.values():
        for msg_seq, source_seq in line.items():
            assert union.setdefault(msg_seq, source_seq) == source_seq, f"two messages at msg_seq {msg_seq}"
    missing = source.normal - set(union.values())
    assert not missing, f"{len(missing)} normal messages on no line, e.g. {sorted(missing)[:5]}"
    assert sorted(union) == list(range(1, len(union) + 1)), "the lines' numbering has a hole"
    assert all(alive)
    assert roles == {1: ["active"], 2: ["backup"], 3: ["backup"]}, roles
    assert [s["role"] for s in statuses] == ["active", "backup", "backup"]
    quarantined = [s["quarantined"] for s in statuses]
    assert quarantined[0] == quarantined[1] == quarantined[2]
    assert sum(quarantined[0].values()) == len(POISON_KINDS) + 1
    assert all(s["gaps"]["handed_over"] == 0 and s["gaps"]["local"] == 0 for s in statuses)
    pump = statuses[0]["source_pump"]  # the active's source pump took the stream, and stopped at poison
    assert pump["runs"] > 0 and pump["handed_back"] > 0, pump
