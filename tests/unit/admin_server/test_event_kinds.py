"""Every kind of hub event has its EventKind on the wire (none reaches a client as UNSPECIFIED)."""

from __future__ import annotations

import re
from pathlib import Path

from feedha.admin_server import convert
from feedha.admin_server.registry import EventKind
from feedha.proto import admin_pb2


def test_every_hub_event_kind_has_an_enum_value() -> None:
    # Events are made by the state owners (hub, subscriptions, adapters, purging ...): read every module.
    source = "".join(path.read_text() for path in sorted(Path(convert.__file__).parent.glob("*.py")))
    kinds = set(re.findall(r'kind="([a-z_]+)"', source)) | {kind.value for kind in EventKind} | {"watching"}
    assert len(kinds) >= 9
    for kind in kinds:
        assert convert.event_kind_to_proto(kind) != "EVENT_KIND_UNSPECIFIED", kind
    assert set(admin_pb2.EventKind.keys()) == {"EVENT_KIND_UNSPECIFIED"} | {
        convert.event_kind_to_proto(kind) for kind in kinds
    }
