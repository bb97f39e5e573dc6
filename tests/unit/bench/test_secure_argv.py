"""The secured benchmark's command lines survive keys that look like options."""

from __future__ import annotations

from pathlib import Path

import pytest

from feedha.adapter.zap import CurveKeys, write_keys
from feedha.bench.client import client_parser
from feedha.bench.pipeline import _SecureGroup
from feedha.cluster import plan_group

pytestmark = pytest.mark.timeout(60)


def _dash_keys(path: Path) -> CurveKeys:
    """Write key pairs at ``path`` until the public key begins with "-" (one in 85 does)."""
    for _ in range(5_000):
        keys = write_keys(path)
        if keys.public.startswith(b"-"):
            return keys
    raise AssertionError("no key beginning with '-' in 5,000 tries")


def test_a_server_key_beginning_with_a_dash_reaches_the_client_parser(tmp_path: Path) -> None:
    # CI once failed here: "argument --server-key: expected one argument".
    group = plan_group(
        channel="EQ",
        channel_number=1,
        source_endpoint="tcp://127.0.0.1:1",
        source_stream="S",
        source_stream_number=1,
        size=2,
    )
    keys = _dash_keys(tmp_path / "EQ-adapter-1.key")
    secure = _SecureGroup(tmp_path, group)
    argv = ["--channel", "EQ", "--channel-number", "1", "--line", "tcp://a", "--line", "tcp://b"]
    args = client_parser().parse_args(argv + secure.client_argv())
    assert args.server_key[0] == keys.public.decode()
    assert len(args.server_key) == 2 and args.curve_key.endswith("EQ-client.key")
