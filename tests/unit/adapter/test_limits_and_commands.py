"""The replay service's budgets and the control socket's command decoding: pure, explicit times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from feedha.adapter.admin_link import core_command
from feedha.adapter.config import AdapterConfig
from feedha.adapter.core.commands import (
    Busy,
    ControlError,
    CorruptState,
    DropPackets,
    Penalty,
    RoleCommand,
    ShowStatus,
    Throttle,
    decode_request,
)
from feedha.adapter.core.config import CoreConfig
from feedha.adapter.core.machine import AdapterCore
from feedha.adapter.core.sync_types import CommandKind
from feedha.adapter.errors import ConfigError
from feedha.adapter.formats.feedha_fix.choice import make_engine
from feedha.adapter.formats.feedha_fix.table import ConverterTable
from feedha.adapter.replay import ReplayLimits, TokenBucket
from feedha.proto.registry import Command as RegistryCommand
from feedha.proto.registry import CommandKind as RegistryCommandKind


def test_a_token_bucket_refills_at_its_rate_up_to_its_burst_and_carries_debt() -> None:
    bucket = TokenBucket(10.0, 2.0, now=0.0)
    assert bucket.has(now=0.0)
    bucket.take(2, now=0.0)
    assert not bucket.has(now=0.05)  # 0.5 token back
    assert bucket.has(now=0.1)
    bucket.take(30, now=0.1)  # an expensive reply: a debt of 29
    assert not bucket.has(now=2.0)
    assert bucket.has(now=3.1)
    assert "rate=10/s" in repr(bucket)


def test_one_flooding_peer_is_refused_while_another_is_served() -> None:
    limits = ReplayLimits(
        peer_requests_per_s=10, peer_bytes_per_s=1e6, total_requests_per_s=100, total_bytes_per_s=1e7
    )
    admitted = sum(limits.admit(b"flood", now=1.0) for _ in range(100))
    assert admitted == 2  # a quarter second's worth of 10/s, rounded down
    assert limits.admit(b"quiet", now=1.0)
    limits.charge(b"quiet", 10**6, now=1.0)  # a big reply: the quiet peer now waits too
    assert not limits.admit(b"quiet", now=1.5)
    assert limits.admit(b"quiet", now=2.0)


def _decode(**request: object) -> object:
    return decode_request(json.dumps(request).encode())


def test_commands_decode_with_their_fields_and_defaults() -> None:
    assert _decode(cmd="status") == ShowStatus()
    assert _decode(cmd="promote") == RoleCommand(CommandKind.PROMOTE, "operator")
    assert _decode(cmd="fail", reason="drill") == RoleCommand(CommandKind.FAIL, "drill")
    assert _decode(cmd="throttle", rate=0) == Throttle(0.0)
    assert _decode(cmd="throttle", rate=500) == Throttle(500.0)
    assert _decode(cmd="drop", every=3, count=40) == DropPackets(3, 40)
    assert _decode(cmd="penalty", value=60) == Penalty(60.0)
    assert _decode(cmd="corrupt_state") == CorruptState(1000)
    assert _decode(cmd="busy", ms=1500) == Busy(1500, 1, "convert", True)
    assert _decode(cmd="busy", ms=20, turns=3, where="tick", gil=False) == Busy(20, 3, "tick", False)


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"cmd": "throttle"}, "needs the field 'rate'"),
        ({"cmd": "throttle", "rate": 1e-300}, "at least 1 msg/s"),
        ({"cmd": "throttle", "rate": float("inf")}, "finite"),
        ({"cmd": "throttle", "rate": True}, "finite number"),
        ({"cmd": "drop", "every": 0}, "every must be an integer"),
        ({"cmd": "penalty", "value": 101}, "0..100"),
        ({"cmd": "busy"}, "needs the field 'ms'"),
        ({"cmd": "busy", "ms": 60_001}, "ms must be an integer"),
        ({"cmd": "busy", "ms": 5, "turns": 0}, "turns must be an integer"),
        ({"cmd": "busy", "ms": 5, "where": "sync"}, "where must be one of convert, report, tick"),
        ({"cmd": "busy", "ms": 5, "gil": "yes"}, "gil must be true or false"),
        ({"cmd": "fail", "reason": "x" * 201}, "at most 200"),
        ({"cmd": "reboot"}, "unknown command 'reboot'"),
        ({"cmd": 7}, "unknown command 7"),
    ],
)
def test_bad_requests_name_what_is_wrong(request_: dict[str, object], message: str) -> None:
    with pytest.raises(ControlError, match=message):
        decode_request(json.dumps(request_).encode())


def test_garbage_and_oversize_requests_are_refused() -> None:
    for data in (
        b"\xff\xfe",
        b"[1, 2]",
        b"{" * 100_000,
        json.dumps({"cmd": "status", "pad": "x" * 5000}).encode(),
    ):
        with pytest.raises(ControlError):
            decode_request(data)


def test_fault_injection_commands_are_refused_unless_the_adapter_was_started_for_drills() -> None:
    def core(fault_injection: bool) -> AdapterCore:
        config = CoreConfig(
            channel_number=1, adapter=1, source_stream_number=1, fault_injection=fault_injection
        )
        return AdapterCore(config, make_engine(ConverterTable.load()), now=0.0)

    for command in (DropPackets(5, 2), CorruptState(), Penalty(0.5), Busy(10)):
        reply, actions = core(False).on_command(command, now=1.0, wall_ns=1)
        assert reply["ok"] is False and "--allow-fault-injection" in reply["error"]
        assert actions == []
        reply, _ = core(True).on_command(command, now=1.0, wall_ns=1)
        assert reply["ok"] is True


@pytest.mark.parametrize(
    ("endpoint", "local"),
    [
        ("ipc:///tmp/feedha-control", True),
        ("tcp://127.0.0.1:6003", True),
        ("tcp://[::1]:6003", True),
        ("tcp://0.0.0.0:6003", False),
        ("tcp://10.1.2.3:6003", False),
        ("tcp://*:6003", False),
    ],
)
def test_the_control_socket_must_be_local(endpoint: str, local: bool) -> None:
    def make() -> AdapterConfig:
        return AdapterConfig(
            channel="c",
            channel_number=1,
            adapter=1,
            source_endpoint="tcp://127.0.0.1:1",
            source_stream="s",
            source_stream_number=1,
            line_endpoint="tcp://127.0.0.1:2",
            sync_endpoint="tcp://127.0.0.1:3",
            control_endpoint=endpoint,
        )

    if local:
        assert make().control_endpoint == endpoint
    else:
        with pytest.raises(ConfigError, match="must be local"):
            make()


def test_admin_tls_arguments_reach_the_config() -> None:
    from feedha.adapter.__main__ import build_parser, config_from_args

    base = ["--channel", "c", "--channel-number", "1", "--adapter", "1", "--source", "tcp://127.0.0.1:1"]
    base += ["--source-stream", "s", "--source-stream-number", "1"]
    base += ["--line", "tcp://127.0.0.1:2", "--sync", "tcp://127.0.0.1:3", "--admin", "127.0.0.1:4"]
    tls = ["--admin-tls-ca", "ca.pem", "--admin-tls-cert", "c.pem", "--admin-tls-key", "k.pem"]
    config = config_from_args(build_parser().parse_args(base + tls))
    assert (config.admin_tls_ca, config.admin_tls_cert, config.admin_tls_key) == (
        Path("ca.pem"),
        Path("c.pem"),
        Path("k.pem"),
    )
    with pytest.raises(ConfigError, match="together"):
        config_from_args(build_parser().parse_args(base + tls[:4]))
    without_admin = [a for a in base if a not in ("--admin", "127.0.0.1:4")]
    with pytest.raises(ConfigError, match="need an admin server"):
        config_from_args(build_parser().parse_args(without_admin + tls[:2]))


def test_the_adapter_hears_force_as_the_cores_promote_with_force() -> None:
    forced = core_command(RegistryCommand(kind=RegistryCommandKind.PROMOTE, term=5, reason="ops", force=True))
    plain = core_command(RegistryCommand(kind=RegistryCommandKind.PROMOTE, term=5, reason="ops"))
    assert isinstance(forced, RoleCommand) and isinstance(plain, RoleCommand)
    assert (forced.force, plain.force) == (True, False)
