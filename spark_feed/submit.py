"""The feed job through ``spark-submit``: the driver program, and a run on a local standalone cluster.

Theory of operation
-------------------
``spark-submit`` runs a Python *file*; :data:`DRIVER_PROGRAM` is the whole of
it (three lines that import the installed ``feedha.spark_feed.job``), so the
driver runs the package as installed, on any master. ``feedha feed
--spark-master local-cluster`` (:func:`run_on_local_cluster`) starts a
:class:`~spark_feed.standalone.LocalCluster`, announces it on stdout as one
JSON line, before anything else::

    {"event": "spark_cluster", "master": "spark://127.0.0.1:PORT",
     "workers": [{"index": 1, "pid": ...}, ...], "dir": "/tmp/feedha-spark-..."}

and submits the job to it in client mode. The driver's JVM runs in its own
session, so a Ctrl-C reaches only this launcher, which asks the *Python*
driver (the JVM's child) to stop with SIGTERM: it finishes the micro-batch in
flight and prints its summary; a JVM signalled first would tear the
SparkContext down under it. ``spark-submit`` merges the Python driver's stderr
into its stdout: lines that are JSON objects go on to our stdout, the rest to
our stderr. Workers that die meanwhile are started again
(:meth:`~spark_feed.standalone.LocalCluster.supervise`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Final

from feedha.spark_feed.standalone import POLL_S, ClusterConfig, ClusterError, LocalCluster, die_with_parent

DRIVER_PROGRAM: Final = "import sys\nfrom feedha.spark_feed.job import main\nsys.exit(main(sys.argv[1:]))\n"
# Set for the driver: it asks the kernel for SIGTERM when its parent (spark-submit's JVM) dies.
DIE_WITH_PARENT: Final = "FEEDHA_DIE_WITH_PARENT"
DRIVER_STOP_S: Final = 60.0  # the job finishes its batch in flight (up to 30 s) and lingers 2 s
# The driver's own log4j set-up: warnings and worse on stderr (Spark's default is INFO on the console).
_DRIVER_LOG4J: Final = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.hadoop.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop.level = error
"""


def write_driver_program(directory: Path) -> Path:
    """Write :data:`DRIVER_PROGRAM` as ``directory/feed_job.py`` and return its path."""
    program = directory / "feed_job.py"
    program.write_text(DRIVER_PROGRAM)
    return program


def run_on_local_cluster(job_args: Sequence[str], config: ClusterConfig | None = None) -> int:
    """Start a local cluster, run the feed job on it with ``spark-submit``, stop the cluster.

    Args:
        job_args: the job's own arguments (``--master`` is replaced: spark-submit gives it).
        config: the cluster's shape.

    Returns:
        The job's exit code; 1 when the cluster did not start (the logs are kept then).
    """
    workdir = Path(tempfile.mkdtemp(prefix="feedha-spark-"))
    code = 1
    try:
        with LocalCluster(workdir, config) as cluster:
            cluster.start()
            print(json.dumps({"event": "spark_cluster", **cluster.describe()}), flush=True)
            program = write_driver_program(workdir)
            code = _Driver(cluster.submit_argv(program, [*job_args, "--master="]), cluster).run()
    except ClusterError as exc:
        print(f"feedha feed: {exc}", file=sys.stderr, flush=True)
    finally:
        if code == 0:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"feedha feed: the Spark cluster's logs are in {workdir / 'logs'}", file=sys.stderr)
    return code


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux ``/proc``; empty elsewhere or when it is gone)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as listing:
                found += [int(child) for child in listing.read().split()]
        except OSError:
            continue
    return found


def _pass_output(stream: IO[bytes]) -> None:
    # JSON lines (the summary) to stdout, the rest (progress, logs) to stderr.
    for line in stream:
        target = sys.stdout if line.startswith(b"{") else sys.stderr
        target.buffer.write(line)
        target.flush()


class _Driver:
    """``spark-submit`` in the foreground (see module doc): output split, stop passed on, workers kept.

    Args:
        argv: the ``spark-submit`` command line.
        cluster: the local cluster it runs on (its workers are supervised), or None.
    """

    def __init__(self, argv: list[str], cluster: LocalCluster | None = None) -> None:
        env = {**os.environ, DIE_WITH_PARENT: "1",
               "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
               "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable)}  # fmt: skip
        workdir = None
        if cluster is not None:
            conf = cluster.workdir / "driver-conf"  # the driver's SPARK_CONF_DIR: its log4j2.properties
            conf.mkdir(exist_ok=True)
            (conf / "log4j2.properties").write_text(_DRIVER_LOG4J)
            env |= {**cluster.env, "SPARK_CONF_DIR": str(conf)}
            # Nothing of the caller's working directory (a clone) on the driver's path.
            workdir = cluster.workdir
        self.cluster = cluster
        self.popen = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True,
            preexec_fn=die_with_parent, cwd=workdir,
        )  # fmt: skip
        self._stop_asked: float | None = None
        self._terminated = False

    def run(self) -> int:
        assert self.popen.stdout is not None
        output = threading.Thread(target=_pass_output, args=(self.popen.stdout,), name="driver-output")
        output.start()
        previous = {
            signum: signal.signal(signum, self._on_signal) for signum in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            while True:
                try:
                    code = self.popen.wait(timeout=POLL_S)
                    return code if code >= 0 else 128 - code  # killed by a signal: 128 + its number
                except subprocess.TimeoutExpired:
                    pass
                self._escalate()
                notes = self.cluster.supervise(time.monotonic()) if self.cluster is not None else []
                for note in notes:
                    print(f"feedha feed: {note}", file=sys.stderr, flush=True)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            if self.popen.poll() is None:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
            output.join(timeout=10)

    def _on_signal(self, _signum: int, _frame: object) -> None:
        # Ask the Python driver, not its JVM, to stop (it stops between micro-batches).
        if self._stop_asked is None:
            self._stop_asked = time.monotonic()
            python = children(self.popen.pid)
            for pid in python or [self.popen.pid]:
                with contextlib.suppress(ProcessLookupError):  # it ended since it was listed
                    os.kill(pid, signal.SIGTERM)

    def _escalate(self) -> None:
        # A driver that has not stopped DRIVER_STOP_S after being asked: SIGTERM its JVM's group,
        # and SIGKILL it 10 s later.
        if self._stop_asked is None or time.monotonic() - self._stop_asked < DRIVER_STOP_S:
            return
        if not self._terminated:
            print("feedha feed: the driver did not stop in time; terminating it", file=sys.stderr, flush=True)
            with contextlib.suppress(ProcessLookupError):  # the group ended meanwhile
                os.killpg(self.popen.pid, signal.SIGTERM)
            self._terminated = True
        elif time.monotonic() - self._stop_asked > DRIVER_STOP_S + 10:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m feedha.spark_feed.submit SPARK-SUBMIT [ARGS...]``: run a spark-submit of the feed job.

    Runs the command line as :func:`run_on_local_cluster` runs its driver: in its
    own session, stdout split into JSON lines and text, and SIGTERM/SIGINT turned
    into a SIGTERM to the Python driver so it stops between micro-batches (a
    container's init sends SIGTERM to its one child; ``deploy/spark/feed-driver.yaml``).

    Returns:
        spark-submit's exit code (128 + N when signal N ended it), 2 without a command.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(main.__doc__, file=sys.stderr)
        return 0 if args else 2
    return _Driver(args).run()


if __name__ == "__main__":
    sys.exit(main())
