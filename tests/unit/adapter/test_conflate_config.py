"""The conflated line's options: flags, the config file, and clear errors for bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from feedha import settings
from feedha.adapter.__main__ import build_parser, config_from_args
from feedha.adapter.config import AdapterConfig
from feedha.adapter.errors import ConfigError

BASE = [
    *("--channel", "c", "--channel-number", "1", "--adapter", "1"),
    *("--source", "tcp://127.0.0.1:1", "--source-stream", "s", "--source-stream-number", "1"),
    *("--line", "tcp://127.0.0.1:2", "--sync", "tcp://127.0.0.1:3"),
]


def _config(argv: list[str]) -> AdapterConfig:
    return config_from_args(settings.parse(build_parser(), argv, environ={}).args)


def test_flags_reach_the_core() -> None:
    config = _config([*BASE, "--conflate-line", "tcp://127.0.0.1:4", "--conflate-interval", "0.25"])
    assert config.conflate_line_endpoint == "tcp://127.0.0.1:4"
    assert config.core().conflate_interval_s == 0.25
    assert ("conflate_line", "tcp://127.0.0.1:4") in config.endpoints
    assert _config(BASE).core().conflate_interval_s is None  # no line: acknowledgements only


def test_the_config_file_sets_them(tmp_path: Path) -> None:
    path = tmp_path / "adapter.yaml"
    path.write_text("conflate-line: tcp://127.0.0.1:5\nconflate_interval: 2\n")
    config = _config([*BASE, "--config", str(path)])
    assert (config.conflate_line_endpoint, config.conflate_interval_s) == ("tcp://127.0.0.1:5", 2.0)


@pytest.mark.parametrize("interval", ["0", "-1", "0.001", "4000", "nan"])
def test_an_interval_out_of_range_is_refused_by_name(interval: str) -> None:
    with pytest.raises(ConfigError, match=r"conflate_interval_s must be in 0.01..3600"):
        _config([*BASE, "--conflate-line", "tcp://127.0.0.1:4", "--conflate-interval", interval])


def test_the_reserved_stream_number_is_refused_with_a_conflated_line() -> None:
    argv = [*BASE, "--conflate-line", "tcp://127.0.0.1:4"]
    argv[argv.index("--source-stream-number") + 1] = "65535"
    with pytest.raises(ConfigError, match="65535 is the conflated line's reserved stream"):
        _config(argv)


def test_a_bad_endpoint_is_refused() -> None:
    with pytest.raises(ConfigError, match="conflate_line_endpoint"):
        _config([*BASE, "--conflate-line", "http://example"])
