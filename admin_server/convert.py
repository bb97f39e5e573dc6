"""Conversions between the pure cores' dataclasses and the admin API's protobuf messages."""

from __future__ import annotations

from admin_server.broker import Route
from admin_server.registry import (
    AdapterRecord,
    AdapterRegistration,
    AdapterRole,
    AdapterStatus,
    Command,
    CommandKind,
    SyncStatus,
)
from proto import admin_pb2


def role_to_proto(role: AdapterRole) -> str:
    """Registry role -> proto enum value name (message constructors take names)."""
    return f"ADAPTER_ROLE_{role.name}"


def role_from_proto(value: int) -> AdapterRole:
    """Proto enum -> registry role (unknown values read as UNSPECIFIED)."""
    try:
        return AdapterRole[admin_pb2.AdapterRole.Name(value).removeprefix("ADAPTER_ROLE_")]
    except ValueError:
        return AdapterRole.UNSPECIFIED


def sync_to_proto(status: SyncStatus) -> str:
    """Registry sync status -> proto enum value name."""
    return f"SYNC_STATUS_{status.name}"


def sync_from_proto(value: int) -> SyncStatus:
    """Proto enum -> registry sync status."""
    try:
        return SyncStatus[admin_pb2.SyncStatus.Name(value).removeprefix("SYNC_STATUS_")]
    except ValueError:
        return SyncStatus.UNSPECIFIED


def registration_to_proto(reg: AdapterRegistration) -> admin_pb2.AdapterRegistration:
    """Registration dataclass -> message."""
    return admin_pb2.AdapterRegistration(
        feed=reg.feed,
        channel_name=reg.channel_name,
        channel_number=reg.channel_number,
        adapter_id=reg.adapter_id,
        line_endpoint=reg.line_endpoint,
        replay_endpoint=reg.replay_endpoint,
        sync_endpoint=reg.sync_endpoint,
        role=role_to_proto(reg.role),
        term=reg.term,
    )


def registration_from_proto(msg: admin_pb2.AdapterRegistration) -> AdapterRegistration:
    """Message -> registration dataclass.

    Raises:
        ValueError: missing adapter id or channel name.
    """
    return AdapterRegistration(
        feed=msg.feed,
        channel_name=msg.channel_name,
        channel_number=msg.channel_number,
        adapter_id=msg.adapter_id,
        line_endpoint=msg.line_endpoint,
        replay_endpoint=msg.replay_endpoint,
        sync_endpoint=msg.sync_endpoint,
        role=role_from_proto(msg.role),
        term=msg.term,
    )


def status_to_proto(status: AdapterStatus) -> admin_pb2.AdapterStatus:
    """Status dataclass -> message."""
    return admin_pb2.AdapterStatus(
        role=role_to_proto(status.role),
        term=status.term,
        next_msg_seq=status.next_msg_seq,
        sync_status=sync_to_proto(status.sync_status),
        health_score=status.health_score,
        lag=status.lag,
    )


def status_from_proto(msg: admin_pb2.AdapterStatus) -> AdapterStatus:
    """Message -> status dataclass."""
    return AdapterStatus(
        role=role_from_proto(msg.role),
        term=msg.term,
        next_msg_seq=msg.next_msg_seq,
        sync_status=sync_from_proto(msg.sync_status),
        health_score=msg.health_score,
        lag=msg.lag,
    )


def command_to_proto(command: Command) -> admin_pb2.OperatorCommand:
    """Command dataclass -> message."""
    return admin_pb2.OperatorCommand(
        kind=f"COMMAND_KIND_{command.kind.name}",
        term=command.term,
        rate=command.rate,
        reason=command.reason,
        issued_by=command.issued_by,
    )


def command_from_proto(msg: admin_pb2.OperatorCommand) -> Command:
    """Message -> command dataclass.

    Raises:
        ValueError: unknown command kind.
    """
    name = admin_pb2.CommandKind.Name(msg.kind).removeprefix("COMMAND_KIND_")
    if name not in CommandKind.__members__:
        raise ValueError(f"unknown command kind {msg.kind}")
    return Command(
        kind=CommandKind[name], term=msg.term, rate=msg.rate, reason=msg.reason, issued_by=msg.issued_by
    )


def record_to_proto(record: AdapterRecord) -> admin_pb2.AdapterInfo:
    """Registry record -> AdapterInfo message."""
    return admin_pb2.AdapterInfo(
        registration=registration_to_proto(record.registration),
        status=status_to_proto(record.status),
        is_up=record.is_up,
        updated_at_ns=int(record.updated_at * 1e9),
    )


def route_to_proto(route: Route) -> admin_pb2.ChannelRoute:
    """Broker route -> ChannelRoute message."""
    channel = route.channel
    return admin_pb2.ChannelRoute(
        feed=channel.feed,
        channel_name=channel.name,
        channel_number=channel.number,
        source_stream=channel.source_stream,
        message_model=channel.message_model,
        lines=[
            admin_pb2.Line(
                adapter_id=line.adapter_id,
                line_endpoint=line.line_endpoint,
                replay_endpoint=line.replay_endpoint,
                role=role_to_proto(line.role),
                term=line.term,
                is_up=line.is_up,
            )
            for line in route.lines
        ],
        symbols=list(route.symbols),
        delayed=route.delayed,
    )
