"""The feed on a Spark standalone cluster of this machine (``--spark-master local-cluster``), in drills.

Each test runs ``feedha drill failover --source spark --spark-master
local-cluster`` as a process: a master and two workers (their own JVMs), the
job submitted with spark-submit, one adapter group and an arbitrating client.
Afterwards no JVM of the cluster may be left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]


def _drill(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "feedha", "drill", "failover", "--source", "spark", "--spark-master",
         "local-cluster", "--backups", "1", "--rate", "20000", "--seconds", "30", "--json", *args],
        capture_output=True, text=True, timeout=850,
    )  # fmt: skip
    assert out.stdout, out.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.stdout)
    print(json.dumps({k: v for k, v in result.items() if k != "client_streams"}))
    assert out.returncode == 0, out.stderr[-3000:]
    return result


def _left_behind(cluster_dir: str) -> list[str]:
    # Processes still running with the cluster's directory in their command line.
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if cluster_dir in cmdline:
                found.append(f"{entry.name}: {cmdline[:200]}")
    return found


def _assert_exactly_once(result: dict[str, Any]) -> None:
    assert (result["lost"], result["duplicates"], result["out_of_order"], result["conflicts"]) == (0, 0, 0, 0)
    assert result["delivered"] == result["sent"] > 400_000
    for counters in result["adapters"].values():  # what the adapters got from the source
        assert (counters["source_gaps"], counters["duplicates"]) == (0, 0), counters
    cluster = result["spark_cluster"]
    assert cluster["master"].startswith("spark://127.0.0.1:") and len(cluster["workers"]) == 2
    assert _left_behind(cluster["dir"]) == []
    assert not Path(cluster["dir"]).exists()  # removed after a clean run


def test_a_lost_worker_costs_nothing() -> None:
    result = _drill("--kill", "worker")
    _assert_exactly_once(result)
    (fault,) = result["faults"]
    assert fault["fault"] == "kill_spark_worker" and fault["during_task"] is not None, fault
    assert not os.path.exists(f"/proc/{fault['pid']}")
    log = Path(result["log"]).read_text(errors="replace")
    assert "Lost executor" in log  # the driver saw the executor go with its worker
    assert "spark worker 1 started again" in log
    assert not result["promoted"]  # a source fault: the adapters had nothing to fail over


def test_the_acceptance_drill_kills_the_active() -> None:
    result = _drill("--kill", "active")
    _assert_exactly_once(result)
    assert result["promoted"] and result["term"] >= 2
