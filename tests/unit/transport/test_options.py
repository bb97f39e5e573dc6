"""transport's pure parts: endpoint schemes, multicast endpoints, option checks, one error base."""

from __future__ import annotations

import pytest

from feedha import transport
from feedha.transport import MulticastOptions, TransportConfigError, TransportError


def test_is_multicast() -> None:
    assert transport.is_multicast("epgm://10.0.0.1;239.192.1.1:7101")
    assert transport.is_multicast("pgm://10.0.0.1;239.192.1.1:7101")
    assert not transport.is_multicast("tcp://127.0.0.1:5601")


def test_multicast_endpoint() -> None:
    assert transport.multicast_endpoint("10.0.0.1", "239.192.1.1", 7101) == "epgm://10.0.0.1;239.192.1.1:7101"
    with pytest.raises(ValueError, match="group"):
        transport.multicast_endpoint("10.0.0.1", "10.0.0.2", 7101)
    with pytest.raises(ValueError, match="interface"):
        transport.multicast_endpoint("eth0", "239.192.1.1", 7101)


def test_bad_options_raise_the_transport_error() -> None:
    with pytest.raises(TransportConfigError, match="rate_kbps") as info:
        MulticastOptions(rate_kbps=0)
    assert isinstance(info.value, TransportError) and isinstance(info.value, ValueError)
