"""Packet keys of multicast channels: handed out, rotated when a holder loses its entitlement. Pure."""

from __future__ import annotations

from feedha.admin_server.sealing import REVOKED_WITHIN_S, SWITCH_S, SealRings, is_multicast
from feedha.proto.seal import SealKey


def _rings() -> SealRings:
    return SealRings(new_key=lambda key_id: SealKey(key_id, bytes([key_id % 256]) * 32))


def test_only_multicast_lines_are_sealed() -> None:
    assert is_multicast("epgm://10.0.0.1;239.1.1.1:7000")
    assert is_multicast("pgm://10.0.0.1;239.1.1.1:7000")
    assert not is_multicast("tcp://10.0.0.1:7000")
    assert not is_multicast("ipc:///tmp/line")


def test_a_sealed_channel_gets_one_key_and_keeps_it_while_nobody_loses_access() -> None:
    rings = _rings()
    assert rings.update({"EQ"}, {"EQ": {"s1"}}, now=0.0) == {"EQ"}
    (key,) = rings.keys_for("EQ")
    assert rings.current("EQ") == key
    # New subscribers join the holders without a rotation.
    assert rings.update({"EQ"}, {"EQ": {"s1", "s2"}}, now=1.0) == set()
    assert rings.keys_for("EQ") == (key,)
    assert rings.keys_for("OTHER") == () and rings.current("OTHER") is None


def test_a_revoked_holder_rotates_the_key_announced_first_then_used() -> None:
    rings = _rings()
    rings.update({"EQ"}, {"EQ": {"alice", "mallory"}}, now=0.0)
    old = rings.current("EQ")
    assert old is not None
    # mallory loses access: a new key is announced to those still entitled...
    assert rings.update({"EQ"}, {"EQ": {"alice"}}, now=10.0) == {"EQ"}
    current, announced = rings.keys_for("EQ")
    assert current == old and announced.key_id == old.key_id + 1 and announced.key != old.key
    assert rings.current("EQ") == old  # ...and the adapters still seal with the old one
    assert rings.update({"EQ"}, {"EQ": {"alice"}}, now=10.0 + SWITCH_S / 2) == set()
    # After the switch delay the adapters are told to use it.
    assert rings.update({"EQ"}, {"EQ": {"alice"}}, now=10.0 + SWITCH_S) == {"EQ"}
    assert rings.current("EQ") == announced and rings.keys_for("EQ") == (announced,)


def test_a_second_revocation_while_a_key_is_announced_keeps_its_switch_and_rotates_once_more() -> None:
    rings = _rings()
    rings.update({"EQ"}, {"EQ": {"a", "b", "c"}}, now=0.0)
    assert rings.update({"EQ"}, {"EQ": {"a", "b"}}, now=1.0) == {"EQ"}
    first = rings.keys_for("EQ")[-1]
    assert rings.due_in(now=1.0) == SWITCH_S
    # b had the announced key too: nothing changes now, the switch is not pushed back...
    assert rings.update({"EQ"}, {"EQ": {"a"}}, now=1.1) == set()
    assert rings.keys_for("EQ")[-1] == first and rings.rings["EQ"].switch_at == 1.0 + SWITCH_S
    # ... it happens on time, and the next key is announced at once (b holds `first`).
    assert rings.update({"EQ"}, {"EQ": {"a"}}, now=1.0 + SWITCH_S) == {"EQ"}
    current, second = rings.keys_for("EQ")
    assert current == first and rings.current("EQ") == first
    assert second.key_id == first.key_id + 1 and second.key != first.key
    assert rings.due_in(now=1.0 + SWITCH_S) == SWITCH_S
    rings.update({"EQ"}, {"EQ": {"a"}}, now=1.0 + 2 * SWITCH_S)
    assert rings.current("EQ") == second and rings.keys_for("EQ") == (second,)
    assert rings.rings["EQ"].rotations == 2 and rings.due_in(now=5.0) is None


def test_churn_faster_than_the_switch_delay_never_keeps_a_revoked_subscriber_reading() -> None:
    """Passes every 50 ms for 10 s; a churner subscribes and cancels every 100 ms throughout."""
    rings, gap, revoked_at = _rings(), 0.05, 3.0
    received: dict[str, set[int]] = {"alice": set(), "mallory": set()}
    sealed_with: list[tuple[float, int]] = []
    for step in range(200):
        now = step * gap
        entitled = {"alice"} | ({"mallory"} if now < revoked_at else set())
        if step % 4 < 2:
            entitled.add(f"churner-{step // 4}")  # a new subscription each cycle, gone after 100 ms
        rings.update({"EQ"}, {"EQ": entitled}, now=now)
        current = rings.current("EQ")
        assert current is not None
        if step:  # alice had every key the adapters seal with before they used it
            assert current.key_id in received["alice"], now
        sealed_with.append((now, current.key_id))
        for name in entitled & set(received):  # the routes hand the keys to those entitled now
            received[name].update(key.key_id for key in rings.keys_for("EQ"))
    unreadable = [at for at, key_id in sealed_with if key_id not in received["mallory"]]
    assert unreadable, "the keys never switched: the revoked subscriber reads on"
    assert unreadable[0] <= revoked_at + 2 * SWITCH_S + gap
    assert all(key_id not in received["mallory"] for at, key_id in sealed_with if at >= unreadable[0])
    assert revoked_at + 2 * SWITCH_S + gap <= REVOKED_WITHIN_S + revoked_at
    # Under that churn the keys switch every SWITCH_S, on time: never pushed back.
    pairs = zip(sealed_with[1:], sealed_with[:-1], strict=True)
    switches = [at for (at, key_id), (_, before) in pairs if key_id != before]
    assert len(switches) >= 10 / SWITCH_S - 2
    assert max(b - a for a, b in zip(switches[:-1], switches[1:], strict=True)) <= SWITCH_S + gap


def test_an_expired_or_cancelled_subscription_is_a_revocation_and_unsealed_channels_are_forgotten() -> None:
    rings = _rings()
    rings.update({"EQ", "FX"}, {"EQ": {"a"}, "FX": {"a"}}, now=0.0)
    assert rings.update({"EQ", "FX"}, {"FX": {"a"}}, now=1.0) == {"EQ"}  # a's EQ access ended
    assert rings.update({"FX"}, {"FX": {"a"}}, now=2.0) == set()
    assert rings.keys_for("EQ") == ()  # no multicast line left: nothing to seal
