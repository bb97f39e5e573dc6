"""feedha.ports: distinct ports outside the ephemeral range, each bindable."""

from __future__ import annotations

import socket

from feedha import ports


def test_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    chosen = ports.free_ports(20) + ports.free_ports(20)
    assert len(set(chosen)) == 40
    low = ports._ephemeral_low()
    assert all(ports.LOWEST <= port < low for port in chosen)
    for port in chosen[:5]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_taken_port_is_never_handed_out(monkeypatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        draws = iter([taken, taken, taken + 1 if taken + 1 < 65535 else taken - 1])
        monkeypatch.setattr(ports, "LOWEST", 1)
        monkeypatch.setattr(ports, "_ephemeral_low", lambda: 65_535)
        monkeypatch.setattr(ports._draw, "randrange", lambda lo, hi: next(draws))
        monkeypatch.setattr(ports, "_given", set())
        (port,) = ports.free_ports(1)
    assert port != taken
