"""Crash and concurrency: a writer process killed with SIGKILL, and a reader tailing a writer process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from feedha.adapter.journal import JournalReader, JournalWriter, Record
from feedha.adapter.journal.segment import list_segments

REPO = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000_000_000_000

CHILD = f"""
import sys
from feedha.adapter.journal import FsyncPolicy, JournalConfig, JournalWriter

directory, count, every, segment_bytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
config = JournalConfig(segment_bytes=segment_bytes, buffer_bytes=16384, fsync=FsyncPolicy.BATCH)
writer = JournalWriter(directory, config)
print("start", writer.last_msg_seq, flush=True)
seq = writer.last_msg_seq + 1 if writer.last_msg_seq >= 0 else 1
while count == 0 or seq <= count:
    writer.append(seq, {T0} + seq, seq % 3, seq * 10, seq.to_bytes(8, "little") * (seq % 13 + 1))
    if seq % every == 0:
        writer.flush()
        print("flushed", seq, flush=True)
    seq += 1
writer.close()
print("done", flush=True)
"""


def record(seq: int) -> Record:
    return Record(seq, T0 + seq, seq % 3, seq * 10, seq.to_bytes(8, "little") * (seq % 13 + 1))


def start_writer(directory: Path, *, count: int, every: int, segment_bytes: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [sys.executable, "-c", CHILD, str(directory), str(count), str(every), str(segment_bytes)]
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)


def test_sigkill_during_group_commit_then_restart(tmp_path: Path) -> None:
    flushed = -1
    for round_ in range(3):
        child = start_writer(tmp_path, count=0, every=1500, segment_bytes=64 * 1024)
        assert child.stdout is not None
        try:
            start = child.stdout.readline().split()
            assert start[0] == "start" and int(start[1]) >= flushed  # restart continues after recovery
            # Let it run several group commits past its own start, then kill it mid-stream:
            # it keeps appending and its flusher keeps writing while we send SIGKILL.
            while True:
                line = child.stdout.readline().split()
                assert line and line[0] == "flushed", line
                if int(line[1]) >= int(start[1]) + 4500:
                    break
            child.send_signal(signal.SIGKILL)
            flushed = int(line[1])
        finally:
            child.kill()
            child.wait()
            child.stdout.close()
        assert child.returncode == -signal.SIGKILL
        writer = JournalWriter(tmp_path)
        report = writer.recovery_report
        writer.close()
        assert report.last_msg_seq >= flushed, (round_, report)
        records = list(JournalReader(tmp_path).read())
        assert len(records) == report.last_msg_seq
        assert records == [record(seq) for seq in range(1, report.last_msg_seq + 1)]
    assert len(list_segments(tmp_path)) > 3


def test_reader_tails_a_writer_process_exactly_once_in_order(tmp_path: Path) -> None:
    count = 20_000
    child = start_writer(tmp_path, count=count, every=5000, segment_bytes=64 * 1024)
    try:
        seen = [r.msg_seq for r in JournalReader(tmp_path).follow(1, count, poll_interval_s=0.001)]
        assert child.wait(timeout=60) == 0
    finally:
        child.kill()
        child.wait()
        assert child.stdout is not None
        child.stdout.close()
    assert seen == list(range(1, count + 1))
    assert list(JournalReader(tmp_path).read(19_990)) == [record(s) for s in range(19_990, count + 1)]
    assert len(list_segments(tmp_path)) > 10


def test_reader_in_a_thread_while_writer_appends(tmp_path: Path) -> None:
    import threading

    count = 5000
    seen: list[Record] = []
    reader = threading.Thread(target=lambda: seen.extend(JournalReader(tmp_path).follow(1, count)))
    writer = JournalWriter(tmp_path)
    reader.start()
    for seq in range(1, count + 1):
        writer.append(*record(seq))
    writer.close()
    reader.join(timeout=60)
    assert not reader.is_alive()
    assert seen == [record(seq) for seq in range(1, count + 1)]
