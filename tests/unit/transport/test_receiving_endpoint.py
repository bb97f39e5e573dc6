"""A multicast line is joined on the receiver's own interface."""

from __future__ import annotations

import pytest

from feedha.transport import receiving_endpoint


def test_a_multicast_line_is_joined_on_the_receivers_interface() -> None:
    assert (
        receiving_endpoint("epgm://10.0.0.1;239.1.1.1:7000", "10.0.0.9") == "epgm://10.0.0.9;239.1.1.1:7000"
    )
    assert receiving_endpoint("pgm://10.0.0.1;239.1.1.1:7000", "10.0.0.9") == "pgm://10.0.0.9;239.1.1.1:7000"


def test_other_lines_are_unchanged() -> None:
    assert receiving_endpoint("tcp://10.0.0.1:7000", "10.0.0.9") == "tcp://10.0.0.1:7000"


@pytest.mark.parametrize(
    ("endpoint", "interface"),
    [
        ("epgm://10.0.0.1:7000", "10.0.0.9"),
        ("epgm://10.0.0.1;239.1.1.1:x", "10.0.0.9"),
        ("epgm://a;239.1.1.1:1", "eth0"),
    ],
)
def test_malformed_endpoints_and_interfaces_are_refused(endpoint: str, interface: str) -> None:
    with pytest.raises(ValueError):
        receiving_endpoint(endpoint, interface)
