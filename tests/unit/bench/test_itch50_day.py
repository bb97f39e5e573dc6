"""feedha bench itch50_day: its capture (a day with a few busy stocks) and its command line."""

from __future__ import annotations

import struct
from collections import Counter

import pytest

from feedha.bench import cli
from feedha.bench.itch50_day import BUSY_SHARE, BUSY_SYMBOLS, make_day_capture
from feedha.proto import moldudp64


def test_the_day_has_its_size_a_directory_first_and_a_few_busy_stocks() -> None:
    capture = make_day_capture(30_000, symbols=500)
    again = make_day_capture(30_000, symbols=500)
    assert again == capture  # seeded: the same bytes
    messages = list(moldudp64.read_binary_file(capture.data))
    assert len(messages) == capture.messages == 30_000
    assert [m[:1] for m in messages[:500]] == [b"R"] * 500 and b"R" not in {m[:1] for m in messages[500:]}
    locates = Counter(struct.unpack_from(">H", m, 1)[0] for m in messages[500:])
    busy = sum(locates[locate] for locate in range(1, BUSY_SYMBOLS + 1))
    assert abs(busy / sum(locates.values()) - BUSY_SHARE) < 0.05
    assert capture.busy == tuple(m[11:19].decode().rstrip() for m in messages[:BUSY_SYMBOLS])
    stamps = [int.from_bytes(m[5:11], "big") for m in messages]
    assert stamps == sorted(stamps) and len(set(stamps)) > 29_000
    kinds = Counter(m[:1] for m in messages[500:])
    assert set(kinds) == set(b"AFECXDUPQ"[i : i + 1] for i in range(9)) and kinds[b"A"] > kinds[b"D"]
    adds = [struct.unpack_from(">Q", m, 11)[0] for m in messages if m[:1] in (b"A", b"F")]
    assert len(adds) == len(set(adds)) and max(adds) < 2**36  # unique, and within what itch-book takes


@pytest.mark.parametrize(("argv", "error"), [
    (["itch50_day", "--messages", "2000"], "--messages must be in 2001..20000000"),
    (["itch50_day", "--messages", "20000001"], "--messages must be in 2001..20000000"),
    (["throughput", "--messages", "5000"], "--messages applies to itch50_day only"),
])  # fmt: skip
def test_bad_messages_are_refused_before_anything_runs(
    argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2 and error in capsys.readouterr().err


def test_the_day_is_run_by_name_only() -> None:
    assert "itch50_day" in cli.BENCHMARKS and "itch50_day" in cli.NOT_IN_ALL
    assert "itch50_day" in cli.build_parser().format_help()


def test_an_unpaced_window_counts_the_messages_delivered_between_its_samples() -> None:
    import os

    from feedha.bench.cpu import RunWindow

    window = RunWindow({"me": os.getpid()})
    window.open(lambda: 1_000)
    sum(i * i for i in range(300_000))  # some CPU in the window
    result = window.close(51_000)
    assert result["messages"] == 50_000 and result["window_s"] > 0
    me = result["processes"]["me"]
    assert me["us_per_msg"] is not None and me["us_per_msg"] > 0
    assert set(result["rss_growth"]) == {"me"}
    with pytest.raises(RuntimeError):
        RunWindow({"me": os.getpid()}).close(1)
