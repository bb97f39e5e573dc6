"""Secure unless told otherwise: keys all or none, none only on loopback, no plaintext admin link off it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from feedha.adapter.config import AdapterConfig
from feedha.adapter.errors import ConfigError
from feedha.plain_source.config import SourceConfig


def _config(**overrides: Any) -> AdapterConfig:
    fields: dict[str, Any] = {
        "channel": "c",
        "channel_number": 1,
        "adapter": 1,
        "source_endpoint": "tcp://127.0.0.1:1",
        "source_stream": "s",
        "source_stream_number": 1,
        "line_endpoint": "tcp://127.0.0.1:2",
        "sync_endpoint": "tcp://127.0.0.1:3",
    }
    return AdapterConfig(**{**fields, **overrides})


KEYS = {"curve_key": Path("a.key"), "sync_key": Path("s.key"), "source_key": Path("src.key.pub")}


def test_without_keys_an_adapter_runs_on_loopback_only() -> None:
    assert _config().curve_key is None  # the demo, drills and tests: loopback, no keys
    assert _config(line_endpoint="ipc:///tmp/line").line_endpoint == "ipc:///tmp/line"
    for name, endpoint in (
        ("line_endpoint", "tcp://0.0.0.0:2"),
        ("sync_endpoint", "tcp://10.0.0.2:3"),
        ("source_endpoint", "tcp://feed.example.com:1"),
        ("line_endpoint", "epgm://10.0.0.1;239.1.1.1:7000"),
    ):
        with pytest.raises(ConfigError, match=r"refusing to run without keys off loopback.*--insecure"):
            _config(**{name: endpoint})
        assert _config(**{name: endpoint}, insecure=True).insecure  # told otherwise


@pytest.mark.parametrize("missing", sorted(KEYS))
def test_a_partial_key_setup_is_refused_and_names_what_it_would_leave_open(missing: str) -> None:
    given = {name: path for name, path in KEYS.items() if name != missing}
    opened = {"curve_key": "line and replay", "sync_key": "sync bus", "source_key": "source link"}[missing]
    with pytest.raises(ConfigError, match=rf"partial key setup.*without {missing}.*{opened}"):
        _config(admin="127.0.0.1:4", **given)
    assert _config(admin="127.0.0.1:4", insecure=True, **given).insecure


def test_with_every_key_an_adapter_may_listen_anywhere_but_reaches_the_admin_server_with_tls() -> None:
    anywhere = {"line_endpoint": "tcp://0.0.0.0:2", "sync_endpoint": "tcp://10.0.0.2:3"}
    assert _config(admin="127.0.0.1:4", **KEYS, **anywhere).curve_key == Path("a.key")
    with pytest.raises(ConfigError, match="plaintext gRPC to the admin server 'admin:50051' off loopback"):
        _config(admin="admin:50051", **KEYS, **anywhere)
    assert _config(admin="admin:50051", admin_tls_ca=Path("ca.pem"), **KEYS, **anywhere).admin_tls_ca


def test_insecure_is_never_taken_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from feedha import settings
    from feedha.adapter.__main__ import _NO_ENV, build_parser

    monkeypatch.setenv("FEEDHA_INSECURE", "1")
    argv = ["--channel", "c", "--channel-number", "1", "--adapter", "1", "--source", "tcp://127.0.0.1:1"]
    argv += ["--source-stream", "s", "--source-stream-number", "1", "--line", "tcp://127.0.0.1:2"]
    argv += ["--sync", "tcp://127.0.0.1:3"]
    assert settings.parse(build_parser(), argv, no_env=_NO_ENV).args.insecure is False


def test_a_source_without_keys_binds_loopback_only_and_takes_keys_in_pairs() -> None:
    assert SourceConfig(streams=("A-M",)).curve_key is None
    with pytest.raises(ValueError, match="without keys off loopback"):
        SourceConfig(streams=("A-M",), bind_host="0.0.0.0")
    with pytest.raises(ValueError, match="without keys off loopback"):
        SourceConfig(streams=("A-M",), endpoints=(("A-M", "tcp://10.0.0.1:5555"),))
    assert SourceConfig(streams=("A-M",), bind_host="0.0.0.0", insecure=True).insecure
    with pytest.raises(ValueError, match="partial key setup"):
        SourceConfig(streams=("A-M",), curve_key=Path("source.key"))
    with pytest.raises(ValueError, match="partial key setup"):
        SourceConfig(streams=("A-M",), allowed_keys=(Path("adapter.key.pub"),))
    keyed = SourceConfig(
        streams=("A-M",), bind_host="0.0.0.0", curve_key=Path("s.key"), allowed_keys=(Path("a.pub"),)
    )
    assert keyed.curve_key == Path("s.key")
