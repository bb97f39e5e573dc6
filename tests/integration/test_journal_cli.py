"""``feedha journal dump|verify`` run as subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from feedha.adapter.journal import JournalWriter
from feedha.adapter.journal.segment import list_segments
from feedha.proto import market_pb2

REPO = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000_000_000_000
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def feedha(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "feedha", "journal", *args],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=REPO,
        timeout=60,
    )


def update(seq: int) -> bytes:
    return market_pb2.MarketUpdate(symbol=f"SYM{seq}", event_time_ns=T0 + seq).SerializeToString()


def make_journal(directory: Path, count: int) -> None:
    with JournalWriter(directory) as writer:
        for seq in range(1, count + 1):
            writer.append(seq, T0 + seq, 2, 100 + seq, update(seq))
        writer.write_checkpoint(count, b"state")


def test_dump_plain_and_json(tmp_path: Path) -> None:
    make_journal(tmp_path, 10)
    plain = feedha("dump", str(tmp_path), "--from", "3", "--to", "5")
    assert plain.returncode == 0, plain.stderr
    lines = plain.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["3", "4", "5"]
    assert lines[0] == f"3 2023-11-14T22:13:20.000000003Z stream=2 source_seq=103 size={len(update(3))}"
    as_json = feedha("dump", str(tmp_path), "--from", "9", "--json")
    items = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [item["msg_seq"] for item in items] == [9, 10]
    assert items[0]["update"]["symbol"] == "SYM9" and items[0]["source_stream"] == 2


def test_dump_follow_sees_records_appended_later(tmp_path: Path) -> None:
    make_journal(tmp_path, 5)
    process = subprocess.Popen(
        [sys.executable, "-m", "feedha", "journal", "dump", str(tmp_path), "--follow", "--to", "12"],
        stdout=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=REPO,
    )
    try:
        assert process.stdout is not None
        first = [process.stdout.readline().split()[0] for _ in range(5)]
        assert first == ["1", "2", "3", "4", "5"]
        with JournalWriter(tmp_path) as writer:
            for seq in range(6, 13):
                writer.append(seq, T0 + seq, 2, 100 + seq, update(seq))
        rest, _ = process.communicate(timeout=60)
        assert [line.split()[0] for line in rest.splitlines()] == [str(s) for s in range(6, 13)]
        assert process.returncode == 0
    finally:
        process.kill()
        process.wait()


def test_verify_ok_then_corrupt(tmp_path: Path) -> None:
    make_journal(tmp_path, 50)
    good = feedha("verify", str(tmp_path))
    assert good.returncode == 0, good.stdout
    assert "records: 50" in good.stdout and good.stdout.rstrip().endswith("OK")
    (segment,) = list_segments(tmp_path)
    data = bytearray(segment.path.read_bytes())
    data[-20] ^= 0x01
    segment.path.write_bytes(bytes(data))
    bad = feedha("verify", str(tmp_path))
    assert bad.returncode == 1
    assert "bad_crc" in bad.stdout and "CORRUPT" in bad.stdout and "records: 49" in bad.stdout


def test_verify_reports_a_corrupt_checkpoint(tmp_path: Path) -> None:
    make_journal(tmp_path, 3)
    slot = next(tmp_path.glob("checkpoint-*.fhc"))
    slot.write_bytes(slot.read_bytes()[:-2])
    result = feedha("verify", str(tmp_path))
    assert result.returncode == 1 and "invalid checkpoint" in result.stdout


def test_usage_errors(tmp_path: Path) -> None:
    assert feedha("dump", str(tmp_path / "missing")).returncode == 2
    assert feedha("frobnicate").returncode == 2
