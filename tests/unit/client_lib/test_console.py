"""Unit tests of the console subscriber's argument handling and rendering (no sockets)."""

from __future__ import annotations

import json

import pytest

from feedha.client import console
from feedha.client.arbiter import ChannelArbiter
from feedha.client.errors import ConfigError
from feedha.client.events import ArbiterConfig, Delivery, GapLost
from feedha.client.subscriber import RCVHWM
from feedha.proto import market_pb2
from feedha.proto.wire import encode_packet


def test_parse_channel() -> None:
    assert console.parse_channel("EQ1=4") == ("EQ1", 4)
    assert console.parse_channel("EQ1") == ("EQ1", None)
    for bad in ("=4", "EQ1=x", "EQ1=70000"):
        with pytest.raises(ConfigError) as info:
            console.parse_channel(bad)
        assert info.value.parameter == "--channel"


def test_build_maps_options() -> None:
    args = console._parser().parse_args(
        [
            "--channel",
            "EQ1=2",
            "--line",
            "tcp://a:1",
            "--line",
            "tcp://b:2",
            "--start-seq",
            "7",
            "--loss-timeout",
            "2",
        ]
    )
    spec, config = console.build(args)
    assert (spec.name, spec.number, spec.endpoints, spec.start_seq) == (
        "EQ1",
        2,
        ("tcp://a:1", "tcp://b:2"),
        7,
    )
    assert config.loss_timeout == 2.0 and config.rcvhwm == RCVHWM == 20_000


@pytest.mark.parametrize(
    "argv",
    [
        [],  # --channel and --line are required
        ["--channel", "EQ1=1", "--line", "tcp://a:1", "--count", "0"],
        ["--channel", "EQ1=1", "--line", "not-an-endpoint"],
        ["--channel", "EQ1=1", "--line", "tcp://a:1", "--line", "tcp://a:1"],
        ["--channel", "EQ1=1", "--line", "tcp://a:1", "--fill-timeout", "0"],
    ],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert console.main(argv) == 2
    assert capsys.readouterr().err


def test_describe_delivery_and_events() -> None:
    update = market_pb2.MarketUpdate(symbol="AAPL", state=market_pb2.SymbolState(last=1.5, volume=9))
    pkt = encode_packet(
        channel=1, adapter=1, term=2, first_seq=5, blocks=[(1, 1, update.SerializeToString())], send_time_ns=0
    )
    (delivery,) = ChannelArbiter(ArbiterConfig(channel=1)).on_packet(0, pkt, now=0.0)
    assert isinstance(delivery, Delivery)
    fields = console.describe(delivery)
    assert (
        fields["symbol"] == "AAPL"
        and fields["last"] == 1.5
        and fields["volume"] == 9
        and fields["msg_seq"] == 5
    )
    assert "#5 AAPL" in console._text(fields) and "volume=9" in console._text(fields)
    lost = console.describe(GapLost(1, 3, 4))
    assert json.loads(json.dumps(lost)) == {"event": "GapLost", "channel": 1, "first_seq": 3, "last_seq": 4}
    assert console._text(lost) == "event=GapLost channel=1 first_seq=3 last_seq=4"
