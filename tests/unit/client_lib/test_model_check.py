"""A client joins only routes whose model it decodes; it refuses an unknown major version clearly."""

from __future__ import annotations

import dataclasses

import pytest

from feedha.admin_client import Line, Route
from feedha.client import ModelRefused, ModelVersionError
from feedha.client._feed_core import FeedCore
from feedha.client.model import check_model, model_problem
from feedha.client.subscriber import SubscriberConfig


def _route(version: str, *, model: str = "feedha.v1.MarketUpdate", number: int = 1) -> Route:
    line = Line(adapter_id=f"c{number}.1", line_endpoint=f"tcp://127.0.0.1:{6000 + number}",
                replay_endpoint="", role="active", term=1, is_up=True)  # fmt: skip
    return Route(feed="EQ", channel_name=f"C{number}", channel_number=number, source_stream="A-M",
                 message_model=model, lines=(line,), symbols=("A*",), delayed=False,
                 model_version=version)  # fmt: skip


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.99", ""])
def test_a_known_major_is_decodable_whatever_its_minor(version: str) -> None:
    assert model_problem(_route(version)) is None


def test_an_unknown_major_is_refused_with_the_channel_model_and_version_named() -> None:
    with pytest.raises(ModelVersionError) as refused:
        check_model((_route("1.1"), _route("2.0", number=2)))
    assert (refused.value.channel, refused.value.model, refused.value.version) == (
        "C2",
        "feedha.v1.MarketUpdate",
        "2.0",
    )
    assert "major version 2" in str(refused.value) and "upgrade the client" in str(refused.value)


def test_an_unknown_model_and_a_garbled_version_are_refused() -> None:
    assert "not a model this client knows" in (model_problem(_route("1.0", model="acme.Quote")) or "")
    assert "MAJOR.MINOR" in (model_problem(_route("one")) or "")


class _Subscriber:
    def __init__(self) -> None:
        self.joined: list[str] = []

    def join(self, spec):  # noqa: ANN001, ANN201 - the FeedCore's subscriber protocol
        self.joined.append(spec.name)
        return len(spec.endpoints)

    def close(self) -> None:
        pass


def test_a_watched_route_set_joins_what_it_can_and_says_once_what_it_cannot() -> None:
    core = FeedCore(SubscriberConfig(), ("", ""))
    made: list[_Subscriber] = []

    def make(spec):  # noqa: ANN001, ANN202
        made.append(_Subscriber())
        made[-1].joined.append(spec.name)
        return made[-1]

    routes = [_route("1.1"), _route("2.0", number=2)]
    subscriber, events = core.apply_routes("subscribed", routes, None, make)
    refused = [e for e in events if isinstance(e, ModelRefused)]
    assert [(e.channel, e.channel_name, e.version) for e in refused] == [(2, "C2", "2.0")]
    assert made[0].joined == ["C1"] and core.lines == 1
    _subscriber, again = core.apply_routes("policy", routes, subscriber, make)
    assert not [e for e in again if isinstance(e, ModelRefused)]  # said once, not at every route update
    fixed = [routes[0], dataclasses.replace(routes[1], model_version="1.2")]
    core.apply_routes("registered", fixed, subscriber, make)
    # The channel is joined once its model is one it decodes.
    assert made[0].joined == ["C1", "C1", "C1", "C2"]
