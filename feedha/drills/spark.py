"""The Spark side of ``feedha drill failover --source spark``: losing a worker of a local cluster mid-task.

With ``--spark-master local-cluster`` the feed announces its standalone
cluster in a ``spark_cluster`` event (``feedha.spark_feed.submit``): the
master, each worker's pid (each leads its own process group, which holds its
executor) and the cluster's directory. :func:`kill_spark_worker` waits until
that worker's executor is running a task (its log says ``Running task ...
(TID n)`` and not yet ``Finished task ... (TID n)``), then SIGKILLs the whole
group, as when a host is lost. The feed's tasks are short (a scan of row
numbers), and the log reaches its file through the worker, so the task may
have finished in the instant between; the driver sees the executor lost
either way, schedules the rest of the run on what is left (a lost task is run
again from the batch's offsets in the checkpoint), and nothing may reach the
adapters twice.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path
from typing import Any, Final

from feedha.procs import JsonProcess, ProcessError

TASK_WAIT_S: Final = 30.0  # how long to wait for a running task before killing anyway
POLL_S: Final = 0.005
_TAIL: Final = 16_384
_RUNNING: Final = re.compile(rb"Running task \S+ in stage \S+ \(TID (\d+)\)")
_FINISHED: Final = re.compile(rb"Finished task \S+ in stage \S+ \(TID (\d+)\)")


def running_task(worker_dir: Path) -> int | None:
    """The TID of a task an executor of this worker is running now (from its log), else None."""
    for log in worker_dir.glob("app-*/*/stderr"):
        try:
            with open(log, "rb") as file:
                file.seek(max(0, os.path.getsize(log) - _TAIL))
                tail = file.read()
        except OSError:
            continue
        started = [int(m.group(1)) for m in _RUNNING.finditer(tail)]
        finished = {int(m.group(1)) for m in _FINISHED.finditer(tail)}
        open_tasks = [tid for tid in started if tid not in finished]
        if open_tasks:
            return open_tasks[-1]
    return None


def kill_spark_worker(
    source: JsonProcess | None, index: int = 1, *, task_wait_s: float = TASK_WAIT_S
) -> dict[str, Any]:
    """SIGKILL worker ``index`` of the feed's local cluster with its executor, while it runs a task if it can.

    Returns:
        The fault as the drill reports it (``during_task``: the TID it cut short, or None).

    Raises:
        ProcessError: the source announced no local cluster.
    """
    event = source.last("spark_cluster") if source is not None else None
    if event is None:
        raise ProcessError("no spark_cluster event from the source (--kill worker needs a local cluster)")
    pid = int(next(w["pid"] for w in event["workers"] if w["index"] == index))
    worker_dir = Path(event["dir"]) / f"worker-{index}"
    deadline = time.monotonic() + task_wait_s
    tid = running_task(worker_dir)
    while tid is None and time.monotonic() < deadline:
        time.sleep(POLL_S)  # polling the executor's log, bounded by the deadline
        tid = running_task(worker_dir)
    os.killpg(pid, signal.SIGKILL)
    return {"fault": "kill_spark_worker", "worker": index, "pid": pid, "during_task": tid}
