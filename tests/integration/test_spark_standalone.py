"""The local standalone cluster's process handling, with stand-in processes instead of JVMs (fast).

Spark itself runs in the slow drills (test_spark_cluster.py); here the daemons
are shell processes that log what Spark's daemons log, so start-up, log
parsing, supervision (a dead worker is started again), process-group stops and
the driver's stop are checked in seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from feedha.drills.spark import running_task
from feedha.spark_feed import standalone, submit
from feedha.spark_feed.standalone import ClusterConfig, ClusterError, Daemon, LocalCluster
from tests.integration.waiting import wait_until

pytestmark = pytest.mark.timeout(60)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie still answers kill(0); it has run its course.
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def _fake(tmp_path: Path, name: str, script: str) -> Daemon:
    return Daemon(name, ["sh", "-c", script], tmp_path / f"{name}.log", dict(os.environ))


def test_cluster_config_is_checked() -> None:
    with pytest.raises(ValueError, match="workers"):
        ClusterConfig(workers=0)
    with pytest.raises(ValueError, match="executor memory"):
        ClusterConfig(worker_memory_mb=512, executor_memory_mb=768)


def test_daemon_log_is_read_and_its_group_stopped(tmp_path: Path) -> None:
    # The daemon starts a child of its own (as a worker starts executors): stop() takes both.
    daemon = _fake(tmp_path, "master", "echo 'INFO Master: Starting Spark master at spark://127.0.0.1:4242'; "
                   "sleep 300 & echo child $!; wait")  # fmt: skip
    daemon.start()
    found = daemon.wait_for_log(standalone._MASTER_URL, time.monotonic() + 10)
    assert not isinstance(found, str) and found.group(1) == "spark://127.0.0.1:4242"
    child = int(daemon.wait_for_log(__import__("re").compile(r"child (\d+)"), time.monotonic() + 10).group(1))  # type: ignore[union-attr]
    daemon.stop(time.monotonic() + 5)
    assert not daemon.alive
    # stop() waits for the daemon, not for its children: a signalled child dies when it is next scheduled.
    wait_until(lambda: _gone(child), 5, f"the daemon's child {child} to die", interval=0.01)


def test_a_daemon_that_dies_or_hangs_at_start_is_an_error(tmp_path: Path) -> None:
    dead = _fake(tmp_path, "worker 1", "echo boom; exit 3")
    dead.start()
    with pytest.raises(ClusterError, match="exited before it was up"):
        dead.wait_for_log("Successfully registered", time.monotonic() + 10)
    silent = _fake(tmp_path, "worker 2", "sleep 300")
    silent.start()
    with pytest.raises(ClusterError, match="did not come up in time"):
        silent.wait_for_log("Successfully registered", time.monotonic() + 0.5)
    silent.stop(time.monotonic() + 5)
    dead.stop(time.monotonic() + 5)


def test_a_dead_worker_is_started_again_after_the_delay(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, ClusterConfig(workers=1, restart_delay_s=0.2))
    worker = _fake(tmp_path, "worker 1", "sleep 300")
    cluster.workers = [worker]
    worker.start()
    first = worker.pid
    os.killpg(first, signal.SIGKILL)
    worker.popen.wait()  # type: ignore[union-attr]
    notes = cluster.supervise(100.0)
    assert notes == ["spark worker 1 died (exit -9)"] and not worker.alive
    assert cluster.supervise(100.1) == []  # not before the delay
    (note,) = cluster.supervise(100.3)
    assert note.startswith("spark worker 1 started again") and worker.alive and worker.pid != first
    assert "workers=1/1" in repr(cluster)
    cluster.stop()
    assert not worker.alive


def test_submit_names_the_master_and_the_driver_program(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, ClusterConfig(workers=2, worker_cores=1))
    cluster.master_url = "spark://127.0.0.1:4242"
    program = submit.write_driver_program(tmp_path)
    argv = cluster.submit_argv(program, ["--rate", "10", "--master="])
    assert argv[0].endswith("/bin/spark-submit") and Path(argv[0]).exists()
    assert argv[1:5] == ["--master", "spark://127.0.0.1:4242", "--deploy-mode", "client"]
    assert "spark.cores.max=2" in argv and argv[-4:] == [str(program), "--rate", "10", "--master="]
    assert "from feedha.spark_feed.job import main" in program.read_text()
    assert (tmp_path / "spark-daemons.conf").read_text().startswith("spark.master.rest.enabled false")


def test_children_finds_a_process_children() -> None:
    parent = subprocess.Popen(["sh", "-c", "sleep 300 & sleep 300 & wait"])
    try:
        deadline = time.monotonic() + 10
        while len(submit.children(parent.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)  # polling /proc with a deadline
        assert len(submit.children(parent.pid)) == 2
        assert submit.children(2**22 + 12345) == []
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        for child in submit.children(parent.pid):
            os.kill(child, signal.SIGKILL)
        parent.wait()


def test_running_task_reads_the_executor_log(tmp_path: Path) -> None:
    log = tmp_path / "app-1" / "0" / "stderr"
    log.parent.mkdir(parents=True)
    assert running_task(tmp_path) is None
    log.write_text("INFO Executor: Running task 0.0 in stage 3.0 (TID 7)\n")
    assert running_task(tmp_path) == 7
    with open(log, "a") as out:
        out.write("INFO Executor: Finished task 0.0 in stage 3.0 (TID 7). 2000 bytes result sent to driver\n")
    assert running_task(tmp_path) is None


def test_drill_refuses_a_worker_kill_without_a_local_cluster() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "feedha", "drill", "failover", "--kill", "worker", "--source", "spark"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2 and "--spark-master local-cluster" in out.stderr
