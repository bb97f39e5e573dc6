"""The admin API's conventions, checked on its descriptor (proto/admin.proto's header lists them)."""

from __future__ import annotations

import re

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from feedha.proto import admin_pb2

FILE = admin_pb2.DESCRIPTOR
METHODS = [(service, method) for service in FILE.services_by_name.values() for method in service.methods]


def _messages(descriptor: Descriptor | None = None) -> list[Descriptor]:
    found = []
    for message in descriptor.nested_types if descriptor else FILE.message_types_by_name.values():
        found += [message, *_messages(message)]
    return found


def test_every_method_has_its_own_request_and_response() -> None:
    used: dict[str, str] = {}
    for service, method in METHODS:
        assert method.input_type.name == f"{method.name}Request", f"{service.name}.{method.name}"
        assert method.output_type.name == f"{method.name}Response", f"{service.name}.{method.name}"
        for message in (method.input_type, method.output_type):
            assert message.full_name not in used, f"{message.name} used by {used.get(message.full_name)} too"
            used[message.full_name] = method.full_name


def test_times_are_timestamps_and_spans_durations() -> None:
    timestamps = []
    for message in _messages():
        for f in message.fields:
            if f.type == FieldDescriptor.TYPE_MESSAGE:
                if f.message_type.full_name == "google.protobuf.Timestamp":
                    assert f.name.endswith("_time"), f"{message.name}.{f.name}"
                    timestamps.append(f.name)
                continue
            assert not re.search(r"(_ns|_ms|_s|_at|_time|_secs?)$", f.name), (
                f"{message.name}.{f.name}: a number"
            )
    assert {"expire_time", "update_time", "create_time", "event_time"} <= set(timestamps)
    login = admin_pb2.LoginResponse.DESCRIPTOR.fields_by_name["lifetime"]
    assert login.message_type.full_name == "google.protobuf.Duration"


def test_list_methods_page() -> None:
    lists = [method for _service, method in METHODS if method.name.startswith("List")]
    assert {m.name for m in lists} == {"ListAdapters", "ListSubscriptions"}
    for method in lists:
        request, response = method.input_type.fields_by_name, method.output_type.fields_by_name
        assert request["page_size"].type == FieldDescriptor.TYPE_INT32
        assert request["page_token"].type == FieldDescriptor.TYPE_STRING
        assert response["next_page_token"].type == FieldDescriptor.TYPE_STRING


def test_kinds_are_enums_and_enum_values_carry_their_type_s_name() -> None:
    for message in _messages():
        for f in message.fields:
            if f.name in ("kind", "cause", "role", "sync_status") or f.name.endswith("_kind"):
                assert f.type == FieldDescriptor.TYPE_ENUM, f"{message.name}.{f.name}"
    for enum in FILE.enum_types_by_name.values():
        prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", enum.name).upper() + "_"
        assert enum.values[0].name == f"{prefix}UNSPECIFIED" and enum.values[0].number == 0
        assert all(value.name.startswith(prefix) for value in enum.values), enum.name
