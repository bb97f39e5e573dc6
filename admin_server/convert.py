"""Conversions between the server's dataclasses and the admin API's protobuf messages.

Only the server's own views are here (registry records, routes); the
registry contract's conversions (registration, status, command) are in
``proto.registry``, which the adapter side shares.
"""

from __future__ import annotations

from feedha.admin_server.broker import Route
from feedha.admin_server.registry import AdapterRecord
from feedha.proto import admin_pb2
from feedha.proto.registry import registration_to_proto, role_to_proto, seal_key_to_proto, status_to_proto


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
                curve_server_key=line.curve_server_key,
            )
            for line in route.lines
        ],
        symbols=list(route.symbols),
        delayed=route.delayed,
        seal_keys=[seal_key_to_proto(key) for key in route.seal_keys],
    )
