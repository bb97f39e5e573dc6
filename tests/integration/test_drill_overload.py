"""``feedha drill overload``: a capture at three times the channel's capacity, the active killed in the burst.

The default suite plays a small ITCH day with the capacity given (no measuring run); the slow
stage measures the capacity and plays the larger days of every format. Each must end with
nothing lost or unaccounted, the backlog reported, and books equal to the reference.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from feedha.adapter.formats.itch50.day import make_itch_capture
from feedha.plain_source.feedha_fix_capture import make_feedha_fix_capture
from tests.fix44_capture import make_capture
from tests.itch50_reference import ItchReference


def _overload(input_format: str, capture: Path, *args: str, timeout: float) -> tuple[int, dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "feedha", "drill", "overload", "--format", input_format,
         "--file", str(capture), "--json", *args],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert out.stdout, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return out.returncode, result


def _check(result: dict[str, Any], messages: int) -> None:
    assert (result["lost"], result["unaccounted"], result["conflicts"]) == (0, 0, 0), result
    assert result["sent"] == messages and result["source_gaps"] == 0
    assert result["reference"]["books_equal"] and result["reference"]["stats_equal"], result["reference"]
    assert result["killed_adapter"] == 1 and result["promoted_adapter"] in (2, 3)
    assert result["backlog_peak"] > 0 and result["drained_s"] is not None
    assert set(result["memory_mib"]) == {"adapter-1", "adapter-2", "adapter-3", "client", "source"}
    assert all(0 < rss < 1024 for rss in result["memory_mib"].values())


@pytest.mark.timeout(120)
def test_a_small_itch_day_at_three_times_a_given_capacity_loses_nothing(tmp_path: Path) -> None:
    capture = make_itch_capture(symbols=200, orders=3000, seed=3)
    path = tmp_path / "day.itch"
    path.write_bytes(capture.data)
    code, result = _overload(
        "itch50", path, "--capacity", "1500", "--burst-seconds", "2", "--kill-after", "1", timeout=110
    )
    _check(result, capture.messages)
    independent = ItchReference()
    independent.feed_file(capture.data)
    assert result["books"] == independent.shown() and result["stats"] == independent.shown_stats()
    assert result["burst_rate"] == 4500.0 and result["calm_rate"] == 750.0
    assert code == 0 and result["passed"] and result["failed_checks"] == []


# The default suite keeps test_a_small_itch_day_at_three_times_a_given_capacity_loses_nothing; the
# slow stage adds the other formats, one with its capacity measured first (about 20-40 s each). The
# must-show runs on captures of 500,000 messages and more are manual (docs/robustness.md).
@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("input_format", ["fix44", "feedha-fix"])
def test_the_other_formats_one_with_its_capacity_measured(tmp_path: Path, input_format: str) -> None:
    path = tmp_path / "capture"
    if input_format == "fix44":
        fix = make_capture(symbols=100, messages=40_000, seed=11)  # enough to measure a pace on
        data, messages = b"".join(fix.messages), len(fix.messages)
        args = ["--measure-seconds", "3"]
    else:
        plain = make_feedha_fix_capture(messages=8000, symbols=100, seed=6)
        data, messages = plain.data, plain.messages
        args = ["--capacity", "1500"]
    path.write_bytes(data)
    code, result = _overload(
        input_format, path, *args, "--burst-seconds", "2", "--kill-after", "1", timeout=230
    )
    _check(result, messages)
    assert result["capacity"] > 0
    assert code == 0 and result["passed"] and result["failed_checks"] == []
