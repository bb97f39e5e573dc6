"""What counts as staying on this host: the test behind "secure unless told otherwise"."""

from __future__ import annotations

import pytest

from feedha.transport.locality import is_local_endpoint, is_loopback_host, is_loopback_target


@pytest.mark.parametrize(
    ("endpoint", "local"),
    [
        ("tcp://127.0.0.1:5555", True),
        ("tcp://127.3.4.5:5555", True),
        ("tcp://localhost:5555", True),
        ("tcp://[::1]:5555", True),
        ("ipc:///run/feedha/line", True),
        ("inproc://line", True),
        ("tcp://10.0.0.1:5555", False),
        ("tcp://*:5555", False),
        ("tcp://0.0.0.0:5555", False),
        ("tcp://feed.example.com:5555", False),
        ("tcp://10.0.0.1;127.0.0.1:5555", True),  # a connect from 10.0.0.1 to loopback
        ("tcp://127.0.0.1;10.0.0.1:5555", False),
        ("epgm://10.0.0.1;239.1.1.1:7000", False),
        ("udp://127.0.0.1:5555", False),
    ],
)
def test_endpoints_off_this_host_are_told_apart(endpoint: str, local: bool) -> None:
    assert is_local_endpoint(endpoint) is local


@pytest.mark.parametrize(
    ("target", "local"),
    [
        ("127.0.0.1:50051", True),
        ("localhost:50051", True),
        ("[::1]:50051", True),
        ("unix:/run/feedha/admin.sock", True),
        ("dns:///127.0.0.1:50051", True),
        ("10.1.2.3:50051", False),
        ("admin.feedha.svc:50051", False),
        ("[2001:db8::1]:50051", False),
        ("127.0.0.1", True),
    ],
)
def test_grpc_targets_off_this_host_are_told_apart(target: str, local: bool) -> None:
    assert is_loopback_target(target) is local


def test_hosts() -> None:
    assert is_loopback_host("[::1]") and is_loopback_host("127.0.0.1") and not is_loopback_host("::")
