"""The store keeps an adapter's whole registration, and reads the records older servers wrote."""

from __future__ import annotations

import json

from feedha.admin_server.records import decode_record, encode_record
from feedha.admin_server.registry import AdapterRecord
from feedha.proto.registry import AdapterRegistration, AdapterRole, AdapterStatus, SyncStatus

REGISTRATION = AdapterRegistration(
    feed="FUTURES",
    channel_name="FU-1",
    channel_number=9,
    adapter_id="fu1-b",
    line_endpoint="tcp://127.0.0.1:6002",
    replay_endpoint="tcp://127.0.0.1:6102",
    sync_endpoint="tcp://127.0.0.1:6202",
    role=AdapterRole.ACTIVE,
    term=4,
    delayed_line_endpoint="tcp://127.0.0.1:6302",
    input_format="itch50",
    conflated_line_endpoint="tcp://127.0.0.1:6402",
)
STATUS = AdapterStatus(role=AdapterRole.ACTIVE, term=4, next_msg_seq=77, sync_status=SyncStatus.IN_SYNC)


def test_a_record_round_trips_with_every_registration_field() -> None:
    record = AdapterRecord(registration=REGISTRATION, status=STATUS, is_up=True, updated_at=12.5)
    assert decode_record(encode_record(record)) == record


def test_a_record_without_the_newer_fields_reads_with_their_defaults() -> None:
    raw = json.loads(
        encode_record(AdapterRecord(registration=REGISTRATION, status=STATUS, is_up=False, updated_at=1.0))
    )
    for name in ("delayed_line_endpoint", "input_format", "conflated_line_endpoint"):
        del raw["registration"][name]  # what a server before this change stored
    registration = decode_record(json.dumps(raw)).registration
    assert (registration.delayed_line_endpoint, registration.input_format) == ("", "feedha-fix")
    assert registration.line_endpoint == REGISTRATION.line_endpoint
