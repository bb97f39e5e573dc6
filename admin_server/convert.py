"""Conversions between the server's dataclasses and the admin API's protobuf messages.

Only the server's own views are here (registry records, routes); the
registry contract's conversions (registration, status, command) are in
``proto.registry``, which the adapter side shares.
"""

from __future__ import annotations

import logging

from google.protobuf import timestamp_pb2

from feedha.admin_server.broker import Route
from feedha.admin_server.records import SubscriptionRecord
from feedha.admin_server.registry import AdapterRecord
from feedha.proto import admin_pb2
from feedha.proto.model import model_named
from feedha.proto.registry import registration_to_proto, role_to_proto, seal_key_to_proto, status_to_proto

logger = logging.getLogger(__name__)


def timestamp(seconds: float) -> timestamp_pb2.Timestamp:
    """Unix seconds -> Timestamp."""
    message = timestamp_pb2.Timestamp()
    message.FromNanoseconds(int(seconds * 1e9))
    return message


def event_kind_to_proto(kind: str) -> str:
    """A hub event's kind (``"registered"``, ``"policy"`` ...) -> its EventKind name (UNSPECIFIED if none)."""
    name = f"EVENT_KIND_{kind.upper()}"
    if name not in admin_pb2.EventKind.keys():
        logger.warning("event kind %r has no EventKind value", kind)
        return "EVENT_KIND_UNSPECIFIED"
    return name


def record_to_proto(record: AdapterRecord) -> admin_pb2.AdapterInfo:
    """Registry record -> AdapterInfo message."""
    return admin_pb2.AdapterInfo(
        registration=registration_to_proto(record.registration),
        status=status_to_proto(record.status),
        is_up=record.is_up,
        update_time=timestamp(record.updated_at),
    )


def subscription_to_proto(record: SubscriptionRecord) -> admin_pb2.SubscriptionInfo:
    """Stored subscription -> SubscriptionInfo message."""
    return admin_pb2.SubscriptionInfo(
        subscription_id=record.subscription_id,
        user=record.user,
        symbols=list(record.symbols),
        create_time=timestamp(record.created_at),
        update_time=timestamp(record.updated_at),
    )


def route_to_proto(route: Route) -> admin_pb2.ChannelRoute:
    """Broker route -> ChannelRoute message."""
    channel = route.channel
    model = model_named(channel.message_model)  # the config admits known models only
    return admin_pb2.ChannelRoute(
        feed=channel.feed,
        channel_name=channel.name,
        channel_number=channel.number,
        source_stream=channel.source_stream,
        message_model=channel.message_model,
        model_version=model.version,
        model_descriptor_set=model.descriptor_set(),
        lines=[
            admin_pb2.Line(
                adapter_id=line.adapter_id,
                line_endpoint=line.line_endpoint,
                replay_endpoint=line.replay_endpoint,
                role=role_to_proto(line.role),
                term=line.term,
                is_up=line.is_up,
                curve_server_key=line.curve_server_key,
                conflated_line_endpoint=line.conflated_line_endpoint,
            )
            for line in route.lines
        ],
        symbols=list(route.symbols),
        delayed=route.delayed,
        seal_keys=[seal_key_to_proto(key) for key in route.seal_keys],
        conflated=route.conflated,
    )
