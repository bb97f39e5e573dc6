"""The registry contract's conversions round-trip and read unknown values safely."""

from __future__ import annotations

import pytest

from feedha.proto import admin_pb2, registry
from feedha.proto.errors import ProtoError
from feedha.proto.registry import (
    AdapterRegistration,
    AdapterRole,
    AdapterStatus,
    Command,
    CommandKind,
    SyncStatus,
)
from feedha.proto.seal import SealKey


def test_registration_round_trip() -> None:
    reg = AdapterRegistration(
        feed="EQUITIES",
        channel_name="EQ-A-M",
        channel_number=1,
        adapter_id="eq1-a",
        line_endpoint="tcp://127.0.0.1:6001",
        replay_endpoint="tcp://127.0.0.1:6101",
        sync_endpoint="tcp://127.0.0.1:6201",
        role=AdapterRole.ACTIVE,
        term=3,
    )
    assert registry.registration_from_proto(registry.registration_to_proto(reg)) == reg


@pytest.mark.parametrize("role", list(AdapterRole))
@pytest.mark.parametrize("sync", list(SyncStatus))
def test_status_round_trip(role: AdapterRole, sync: SyncStatus) -> None:
    status = AdapterStatus(role=role, term=7, next_msg_seq=42, sync_status=sync, health_score=97.5, lag=-2)
    assert registry.status_from_proto(registry.status_to_proto(status)) == status


@pytest.mark.parametrize("kind", list(CommandKind))
def test_command_round_trip(kind: CommandKind) -> None:
    key = SealKey(7, bytes(range(32))) if kind is CommandKind.SEAL else None
    purge = registry.PurgeRange(10, 12) if kind is CommandKind.PURGE else None
    command_id = "c-1" if kind is CommandKind.PURGE else ""
    command = Command(
        kind=kind,
        term=4,
        rate=100.0,
        reason="drill",
        issued_by="ops",
        seal_key=key,
        purge=purge,
        command_id=command_id,
        grants=(registry.AccessGrant("a" * 40, 5, delayed_only=True, owner="alice\nbob"),),
    )
    assert registry.command_from_proto(registry.command_to_proto(command)) == command


def test_a_grant_s_owner_is_carried_and_bounded() -> None:
    message = admin_pb2.OperatorCommand(kind=admin_pb2.COMMAND_KIND_GRANT)
    message.grants.add(curve_public_key="a" * 40, owner="alice")
    assert registry.command_from_proto(message).grants[0].owner == "alice"
    message.grants.add(curve_public_key="b" * 40)  # from a server that names no owner
    assert registry.command_from_proto(message).grants[1].owner == ""
    message.grants.add(curve_public_key="c" * 40, owner="x" * (registry.MAX_OWNER_CHARS + 1))
    with pytest.raises(ProtoError, match="owner of 1025 characters"):
        registry.command_from_proto(message)


def test_a_purge_command_needs_a_range_and_an_id() -> None:
    with pytest.raises(ProtoError, match="without a range or a command id"):
        registry.command_from_proto(admin_pb2.OperatorCommand(kind=admin_pb2.COMMAND_KIND_PURGE))
    ranged = admin_pb2.OperatorCommand(kind=admin_pb2.COMMAND_KIND_PURGE, purge=admin_pb2.PurgeRange())
    with pytest.raises(ProtoError, match="without a range or a command id"):
        registry.command_from_proto(ranged)


def test_command_result_round_trip_and_bounds() -> None:
    result = registry.CommandResult(
        command_id="c-9",
        ok=False,
        error_reason="ALREADY_DELIVERED",
        message="too late",
        frontier_msg_seq=41,
        confirmed=(2,),
        unconfirmed=(3,),
    )
    assert registry.result_from_proto(registry.result_to_proto(result)) == result
    huge = admin_pb2.CommandResult(command_id="x" * 1000, message="m" * 10_000)
    decoded = registry.result_from_proto(huge)
    assert len(decoded.command_id) == 64 and len(decoded.message) == 1024


def test_a_seal_command_needs_a_whole_key() -> None:
    with pytest.raises(ProtoError, match="without a key"):
        registry.command_from_proto(admin_pb2.OperatorCommand(kind=admin_pb2.COMMAND_KIND_SEAL))
    short = admin_pb2.SealKey(key_id=1, key=b"short")
    with pytest.raises(ProtoError, match="32 bytes"):
        registry.command_from_proto(
            admin_pb2.OperatorCommand(kind=admin_pb2.COMMAND_KIND_SEAL, seal_key=short)
        )


def test_unknown_enum_values() -> None:
    assert registry.role_from_proto(999) is AdapterRole.UNSPECIFIED
    assert registry.sync_from_proto(999) is SyncStatus.UNSPECIFIED
    with pytest.raises(ProtoError, match="unknown command kind"):
        registry.command_from_proto(admin_pb2.OperatorCommand(kind=0))


def test_registration_from_proto_refuses_a_missing_adapter_id() -> None:
    with pytest.raises(ValueError, match="adapter_id"):
        registry.registration_from_proto(admin_pb2.AdapterRegistration(channel_name="EQ-A-M"))


def test_command_kind_the_schema_lacks() -> None:
    with pytest.raises(ProtoError, match="unknown command kind 99"):
        registry.command_from_proto(admin_pb2.OperatorCommand(kind=99))


def test_force_travels_with_a_promote_only() -> None:
    forced = Command(kind=CommandKind.PROMOTE, term=5, reason="ops", force=True)
    assert registry.command_from_proto(registry.command_to_proto(forced)).force
    stray = admin_pb2.OperatorCommand(kind=admin_pb2.COMMAND_KIND_DEMOTE, term=5, force=True)
    assert not registry.command_from_proto(stray).force  # force means nothing to a DEMOTE


def test_a_curve_key_must_decode_to_32_bytes_and_not_be_zero() -> None:
    import zmq
    from zmq.utils import z85

    from feedha.proto.registry import is_curve_key

    assert all(is_curve_key(zmq.curve_keypair()[0].decode()) for _ in range(20))
    assert not is_curve_key(z85.encode(bytes(32)).decode())  # the point at zero
    assert not is_curve_key("#" * 40)  # 85**5 - 1 > 2**32 - 1: decodes to nothing
    assert not is_curve_key("a" * 39) and not is_curve_key("a" * 39 + " ")


def test_every_registration_field_travels_by_one_mapping() -> None:
    reg = AdapterRegistration(
        feed="FUTURES",
        channel_name="FU-1",
        channel_number=9,
        adapter_id="fu1-b",
        line_endpoint="epgm://eth0;239.1.1.1:7001",
        replay_endpoint="tcp://127.0.0.1:6102",
        sync_endpoint="tcp://127.0.0.1:6202",
        role=AdapterRole.FAILED,
        term=11,
        curve_public_key="rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7",
        delayed_line_endpoint="tcp://127.0.0.1:6302",
        input_format="fix44",
        conflated_line_endpoint="tcp://127.0.0.1:6402",
    )
    wire_names = {f.name for f in admin_pb2.AdapterRegistration.DESCRIPTOR.fields}
    values = registry.registration_values(reg)
    assert set(values) <= wire_names and values["role"] == "failed"
    assert len(values) == len(AdapterRegistration.__dataclass_fields__)
    assert registry.registration_from_proto(registry.registration_to_proto(reg)) == reg
    assert (
        registry.registration_from_proto(
            admin_pb2.AdapterRegistration(adapter_id="x", channel_name="C")
        ).input_format
        == "feedha-fix"
    )
