"""Packet keys of multicast channels: handed out, rotated when a holder loses its entitlement. Pure."""

from __future__ import annotations

from feedha.admin_server.sealing import SWITCH_S, SealRings, is_multicast
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


def test_a_second_revocation_while_a_key_is_announced_replaces_that_key() -> None:
    rings = _rings()
    rings.update({"EQ"}, {"EQ": {"a", "b", "c"}}, now=0.0)
    rings.update({"EQ"}, {"EQ": {"a", "b"}}, now=1.0)
    first = rings.keys_for("EQ")[-1]
    rings.update({"EQ"}, {"EQ": {"a"}}, now=1.1)  # b had the announced key: it must not be used
    second = rings.keys_for("EQ")[-1]
    assert second.key_id == first.key_id + 1 and second.key != first.key
    rings.update({"EQ"}, {"EQ": {"a"}}, now=1.1 + SWITCH_S)
    assert rings.current("EQ") == second
    assert rings.rings["EQ"].rotations == 2


def test_an_expired_or_cancelled_subscription_is_a_revocation_and_unsealed_channels_are_forgotten() -> None:
    rings = _rings()
    rings.update({"EQ", "FX"}, {"EQ": {"a"}, "FX": {"a"}}, now=0.0)
    assert rings.update({"EQ", "FX"}, {"FX": {"a"}}, now=1.0) == {"EQ"}  # a's EQ access ended
    assert rings.update({"FX"}, {"FX": {"a"}}, now=2.0) == set()
    assert rings.keys_for("EQ") == ()  # no multicast line left: nothing to seal
