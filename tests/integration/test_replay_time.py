"""Replay by time against real adapters: the CLI prints exactly the window's messages; the drill passes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from feedha.adapter.journal import JournalReader
from tests.integration.groups import running_group

MS = 1_000_000


def test_feedha_replay_prints_exactly_the_messages_published_in_the_window(tmp_path: Path) -> None:
    with running_group(
        channel="EQ-T", channel_number=9, size=1, rate=2000, seconds=1.5, symbols=20, journal_root=tmp_path
    ) as g:
        g.start_adapter(1, active=True)
        g.start_source()
        sent = g.sent()
        g.wait_status(1, lambda s: s["journal_last_msg_seq"] == sent, 10)
        records = list(JournalReader(g.journal(1)).read())
        start = records[0].time_ns + 300 * MS
        end = start + 900 * MS
        expected = [r.msg_seq for r in records if start <= r.time_ns < end]
        argv = [sys.executable, "-m", "feedha", "replay", "9", "--json"]
        argv += ["--from", f"{start / 1e9:.9f}", "--to", f"{end / 1e9:.9f}"]
        argv += ["--service", g.plan.adapter(1).replay]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    seqs = [line["msg_seq"] for line in lines if line["event"] == "Delivery"]
    assert len(expected) > 500 and seqs == expected
    assert all(line["symbol"] for line in lines if line["event"] == "Delivery")
    assert lines[-1]["event"] == "Summary" and lines[-1]["delivered"] == len(expected)


@pytest.mark.slow
def test_drill_replay_time_replays_the_window_exactly_and_on_time() -> None:
    argv = [sys.executable, "-m", "feedha", "drill", "replay-time", "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["window_messages"] > 5000
    for replay in (result["paced"], result["full_speed"]):
        assert replay["exact"] and replay["content_mismatches"] == 0 and replay["missing"] == 0
    assert result["paced_error_pct"] <= 5.0
