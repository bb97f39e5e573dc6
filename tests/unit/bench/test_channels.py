"""Pure parts of the channel scale-out benchmark: the stream split and the per-role CPU summary."""

from __future__ import annotations

import string

import pytest

from feedha.bench import cli
from feedha.bench.channels import _by_role, stream_letters


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 8, 13, 26])
def test_streams_cover_a_to_z_once_and_evenly(count: int) -> None:
    spans = stream_letters(count)
    assert len(spans) == count
    letters = "".join(string.ascii_uppercase[ord(s[0]) - 65 : ord(s[2]) - 64] for s in spans)
    assert letters == string.ascii_uppercase
    sizes = [ord(s[2]) - ord(s[0]) + 1 for s in spans]
    assert max(sizes) - min(sizes) <= 1


def test_stream_split_examples_and_limits() -> None:
    assert stream_letters(1) == ["A-Z"]
    assert stream_letters(2) == ["A-M", "N-Z"]
    for bad in (0, 27):
        with pytest.raises(ValueError, match="1..26"):
            stream_letters(bad)


def test_by_role_averages_each_role() -> None:
    processes = [
        {"channel": 0, "role": "source", "cpu_percent": 20.0, "us_per_msg": 1.0},
        {"channel": 1, "role": "active", "cpu_percent": 40.0, "us_per_msg": 2.0},
        {"channel": 2, "role": "active", "cpu_percent": 20.0, "us_per_msg": 4.0},
        {"channel": 1, "role": "client", "cpu_percent": 10.0, "us_per_msg": None},
    ]
    roles = _by_role(processes)
    assert roles["active"] == {"cpu_percent": 30.0, "us_per_msg": 3.0}
    assert roles["client"] == {"cpu_percent": 10.0, "us_per_msg": None}
    assert roles["backup"] == {"cpu_percent": None, "us_per_msg": None}


def test_hosts_applies_to_channels_only(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["throughput", "--hosts", "netns"])
    assert exit_info.value.code == 2
    assert "--hosts applies to channels only" in capsys.readouterr().err
