"""Unit tests of the subscriber's channel specs and config (no sockets)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from feedha import client as client_lib
from feedha.client import ChannelSpec, ConfigError, LineSpec, SubscriberConfig, channel_specs_from_routes
from feedha.client.subscriber import normalize_channels


def test_mapping_form_adopts_channel_numbers() -> None:
    (spec,) = normalize_channels({"EQ1": ["tcp://a:1", "tcp://b:2"]})
    assert spec == ChannelSpec("EQ1", None, ("tcp://a:1", "tcp://b:2"))


def test_line_specs_grouped_by_channel() -> None:
    specs = normalize_channels(
        [LineSpec("tcp://a:1", "EQ1", 1), LineSpec("tcp://b:1", "EQ2", 2), LineSpec("tcp://a:2", "EQ1", 1)]
    )
    assert specs == [ChannelSpec("EQ1", 1, ("tcp://a:1", "tcp://a:2")), ChannelSpec("EQ2", 2, ("tcp://b:1",))]


@pytest.mark.parametrize(
    ("channels", "parameter"),
    [
        ({}, "channels"),
        ({"EQ1": []}, "endpoints"),
        ({"EQ 1": ["tcp://a:1"]}, "name"),
        ({"EQ1": ["a:1"]}, "endpoints"),
        ([LineSpec("tcp://a:1", "EQ1", 1), LineSpec("tcp://a:2", "EQ1", 2)], "channels"),
        ([ChannelSpec("EQ1", 1, ("tcp://a:1",)), ChannelSpec("EQ1", 1, ("tcp://a:2",))], "channels"),
        (["tcp://a:1"], "channels"),
    ],
)
def test_bad_channels_name_the_parameter(channels: object, parameter: str) -> None:
    with pytest.raises(ConfigError) as info:
        normalize_channels(channels)  # type: ignore[arg-type]
    assert info.value.parameter == parameter


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [({"rcvhwm": -1}, "rcvhwm"), ({"batch": 0}, "batch"), ({"loss_timeout": 0.01}, "loss_timeout")],
)
def test_bad_config_names_the_parameter(kwargs: dict[str, object], parameter: str) -> None:
    with pytest.raises(ConfigError) as info:
        SubscriberConfig(**kwargs)  # type: ignore[arg-type]
    assert info.value.parameter == parameter


@dataclass
class FakeLine:
    line_endpoint: str


@dataclass
class FakeRoute:
    channel_name: str
    channel_number: int
    lines: tuple[FakeLine, ...]


def test_channel_specs_from_admin_routes() -> None:
    routes = [FakeRoute("EQ1", 1, (FakeLine("tcp://a:1"), FakeLine("tcp://b:1")))]
    assert channel_specs_from_routes(routes, start_seq=5) == [
        ChannelSpec("EQ1", 1, ("tcp://a:1", "tcp://b:1"), start_seq=5)
    ]


def test_a_route_s_term_is_its_up_active_or_backup_lines_highest_and_a_spec_carries_it() -> None:
    from feedha.admin_client import Line, Route
    from feedha.client._subscriber_config import route_term

    def line(n: int, role: str, term: int, *, up: bool = True) -> Line:
        return Line(adapter_id=f"a{n}", line_endpoint=f"tcp://h:{n}", replay_endpoint="", role=role,
                    term=term, is_up=up)  # fmt: skip

    lines = (line(1, "active", 5), line(2, "backup", 5), line(3, "failed", 9), line(4, "active", 8, up=False))
    route = Route(feed="f", channel_name="EQ", channel_number=1, source_stream="s", message_model="m",
                  lines=lines, symbols=("*",), delayed=False)  # fmt: skip
    assert route_term(route) == 5  # a failed line or one that is down may be a zombie's
    assert channel_specs_from_routes([route])[0].term == 5
    assert route_term(FakeRoute("EQ", 1, (FakeLine("tcp://a:1"),))) == 0  # lines that say no term
    with pytest.raises(ConfigError, match="u32 term"):
        ChannelSpec("EQ", 1, ("tcp://a:1",), term=2**32)


def test_public_api_is_exported() -> None:
    for name in client_lib.__all__:
        assert getattr(client_lib, name) is not None
    with pytest.raises(AttributeError):
        _ = client_lib.NoSuchName
