"""``feedha drill delayed``: the issue's command, short in the default suite and whole as a slow drill."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

FIELDS = ("sent", "delivered", "lost", "duplicates", "conflicts", "tombstones", "early", "late_purge_refused")


def drill(*args: str, timeout: float) -> tuple[int, dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "feedha", "drill", "delayed", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.stdout, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    print(json.dumps({key: result[key] for key in (*FIELDS, "overshoot_ms_p50", "overshoot_ms_p99")}))
    return out.returncode, result


def check(code: int, result: dict[str, Any], *, purges: int) -> None:
    assert all(field in result for field in FIELDS)
    assert "overshoot_ms_p50" in result and "overshoot_ms_p99" in result
    assert (result["lost"], result["duplicates"], result["conflicts"], result["early"]) == (0, 0, 0, 0), (
        result
    )
    assert result["tombstones"] == purges and result["purged_seen"], result
    assert result["late_purge_refused"] is True, result["late_purge_reply"]
    assert result["killed"] == "active" and result["promoted_adapter"] is not None
    assert result["delivered"] + result["tombstones"] == result["sent"]
    assert code == 0


@pytest.mark.slow  # over 10 s: with the drills, so the default suite stays under 10 minutes
@pytest.mark.timeout(120)
def test_a_short_delayed_drill_with_purges_and_a_failover() -> None:
    code, result = drill(
        *("--delay", "2", "--seconds", "6", "--rate", "1000", "--purge", "2", "--kill", "active"), timeout=110
    )
    check(code, result, purges=2)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_issue_s_delayed_drill() -> None:
    code, result = drill(
        *("--delay", "5", "--seconds", "20", "--purge", "3", "--kill", "active"), timeout=280
    )
    check(code, result, purges=3)


def test_the_drill_refuses_settings_it_cannot_run() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "feedha", "drill", "delayed", "--delay", "0.2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "need --delay > 0.5" in out.stderr
