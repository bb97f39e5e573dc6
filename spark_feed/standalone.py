"""A Spark standalone cluster on this machine: a master and workers, each its own JVM.

Theory of operation
-------------------
``--master local-cluster`` runs the feed as it runs on a real cluster, on one
machine: :class:`LocalCluster` starts a standalone master and
:attr:`ClusterConfig.workers` workers with ``spark-class`` from the pyspark
package (``SPARK_HOME`` is the package folder), each its own JVM with its own
ports (chosen by the kernel, read back from the logs), work directory and log
file, bound to 127.0.0.1; :func:`spark_feed.submit.run_on_local_cluster`
then submits the feed job with ``spark-submit --master spark://...`` in client
mode, exactly as ``deploy/spark/README.md`` does against any ``spark://``
master. Executors run only Spark's own code (the rate source scan and its Arrow collect), so they
need no Python and nothing of feedha; the driver runs the installed package.

Every daemon runs in its own session, so a signal to its process group
reaches the JVMs it started (a worker's executors) too. A worker that dies is
started again after :attr:`ClusterConfig.restart_delay_s` (what a host's
service manager would do), and the master gives the application an executor
on it. Stopping sends SIGTERM to every group and SIGKILL to what is left
after :data:`STOP_WAIT_S`; each daemon also gets SIGTERM from the kernel if
this process dies first (``PR_SET_PDEATHSIG``), so no JVM outlives it.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Final

logger = logging.getLogger(__name__)

LOCAL_CLUSTER: Final = "local-cluster"
HOST: Final = "127.0.0.1"
STOP_WAIT_S: Final = 15.0
POLL_S: Final = 0.2
_PR_SET_PDEATHSIG: Final = 1
_MASTER_URL: Final = re.compile(r"Starting Spark master at (spark://\S+)")
_MASTER_ALIVE: Final = "New state: ALIVE"
_REGISTERED: Final = "Successfully registered with master"
# Spark settings of the daemons: no REST submission server (it takes the fixed port 6066), no stray
# state between runs.
_DAEMON_PROPERTIES: Final = {
    "spark.master.rest.enabled": "false",
    "spark.worker.cleanup.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}


class ClusterError(RuntimeError):
    """The local cluster could not start (no Java, a daemon that died or did not come up in time)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterConfig:
    """The shape of a local standalone cluster.

    Attributes:
        workers: worker JVMs (each runs one executor of the feed job).
        worker_cores: cores each worker offers.
        worker_memory_mb: memory each worker offers.
        executor_memory_mb: heap of each executor (at most ``worker_memory_mb``).
        start_timeout_s: how long the master and each worker may take to come up.
        restart_delay_s: a dead worker is started again after this long (negative: never).
    """

    workers: int = 2
    worker_cores: int = 1
    worker_memory_mb: int = 1024
    executor_memory_mb: int = 768
    start_timeout_s: float = 180.0
    restart_delay_s: float = 2.0

    def __post_init__(self) -> None:
        if not 1 <= self.workers <= 16 or self.worker_cores < 1:
            raise ValueError(f"need 1..16 workers of >= 1 core: {self.workers} x {self.worker_cores}")
        if not 256 <= self.executor_memory_mb <= self.worker_memory_mb:
            raise ValueError(
                f"executor memory must be 256..{self.worker_memory_mb} MB: {self.executor_memory_mb}"
            )


def spark_home() -> Path:
    """The Spark distribution inside the pyspark package (``bin/spark-class``, ``bin/spark-submit``, jars)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


# Looked up once here: between fork and exec (preexec_fn) the child must not load anything.
_PRCTL: Final = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def die_with_parent() -> None:
    """Ask the kernel for SIGTERM when the parent dies, however it dies (Linux; elsewhere nothing).

    Runs in a child between fork and exec (``preexec_fn``), so a killed
    launcher leaves no JVM behind, or in a driver about its JVM.
    """
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Daemon:
    """One JVM of the cluster (the master or a worker), in its own session, logging to a file."""

    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str]
    popen: subprocess.Popen[bytes] | None = None
    starts: int = 0
    died_at: float | None = None
    _log: IO[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        """Start (or start again) the JVM; its log file is appended to."""
        if self._log is not None:
            self._log.close()
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, env=self.env,
            cwd=self.log_path.parent, start_new_session=True, preexec_fn=die_with_parent,
        )  # fmt: skip
        self.starts += 1
        self.died_at = None

    @property
    def pid(self) -> int:
        """The JVM's pid (``spark-class`` execs ``java``), also its process group."""
        assert self.popen is not None
        return self.popen.pid

    @property
    def alive(self) -> bool:
        """Whether the JVM runs."""
        return self.popen is not None and self.popen.poll() is None

    def signal_group(self, signum: int) -> None:
        """Send ``signum`` to the daemon's process group (the JVM and every process it started)."""
        if self.popen is not None:
            try:
                os.killpg(self.pid, signum)
            except ProcessLookupError:
                pass  # the whole group is gone already

    def log_text(self) -> str:
        """What the daemon logged so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_for_log(self, pattern: str | re.Pattern[str], deadline: float) -> re.Match[str] | str:
        """Poll the log until it shows ``pattern`` (a regex or a plain substring).

        Raises:
            ClusterError: the daemon died, or the deadline passed.
        """
        while True:
            text = self.log_text()
            if isinstance(pattern, re.Pattern):
                found = pattern.search(text)
                if found:
                    return found
            elif pattern in text:
                return pattern
            if not self.alive:
                raise ClusterError(f"spark {self.name} exited before it was up; its log: {self.log_path}")
            if time.monotonic() > deadline:
                raise ClusterError(f"spark {self.name} did not come up in time; its log: {self.log_path}")
            time.sleep(POLL_S)  # polling a log file, bounded by the deadline

    def stop(self, deadline: float) -> None:
        """SIGTERM the group, wait until ``deadline``, SIGKILL the group if the JVM is still there."""
        if self.popen is not None:
            self.signal_group(signal.SIGTERM)
            try:
                self.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                logger.warning("spark %s ignored SIGTERM; killing it", self.name)
            self.signal_group(signal.SIGKILL)  # also executors a killed worker may have left
            self.popen.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None


class LocalCluster:
    """A standalone master and workers on 127.0.0.1 (see module doc); a context manager that stops them.

    Args:
        workdir: the cluster's directory (logs, the workers' work directories, the properties file).
        config: its shape.

    Raises:
        ClusterError: no ``java`` on PATH.
    """

    def __init__(self, workdir: Path, config: ClusterConfig | None = None) -> None:
        if shutil.which("java") is None:
            raise ClusterError("no java on PATH: Spark needs a Java runtime (17 or later)")
        self.workdir = workdir
        self.config = config or ClusterConfig()
        self.master_url = ""
        self._home = spark_home()
        (workdir / "logs").mkdir(parents=True, exist_ok=True)
        properties = workdir / "spark-daemons.conf"
        properties.write_text("".join(f"{k} {v}\n" for k, v in _DAEMON_PROPERTIES.items()))
        self.env = {
            **os.environ,
            "SPARK_HOME": str(self._home),
            "SPARK_LOCAL_IP": HOST,  # every listener, the web UIs too, on loopback only
            "SPARK_LOG_DIR": str(workdir / "logs"),
            "SPARK_NO_DAEMONIZE": "1",
        }
        spark_class = [str(self._home / "bin" / "spark-class")]
        self.master = Daemon(
            "master",
            [*spark_class, "org.apache.spark.deploy.master.Master", "--host", HOST, "--port", "0",
             "--webui-port", "0", "--properties-file", str(properties)],
            workdir / "logs" / "master.log", self.env,
        )  # fmt: skip
        self.workers: list[Daemon] = []
        self._properties = properties
        self._spark_class = spark_class

    def start(self) -> None:
        """Start the master, then the workers; return once every worker has registered.

        Raises:
            ClusterError: a daemon died or did not come up within the configured time.
        """
        deadline = time.monotonic() + self.config.start_timeout_s
        self.master.start()
        found = self.master.wait_for_log(_MASTER_URL, deadline)
        assert isinstance(found, re.Match)
        self.master_url = found.group(1)
        self.master.wait_for_log(_MASTER_ALIVE, deadline)
        for index in range(1, self.config.workers + 1):
            log = self.workdir / "logs" / f"worker-{index}.log"
            self.workers.append(Daemon(f"worker {index}", self._worker_argv(index), log, self.env))
        for worker in self.workers:
            worker.start()
        for worker in self.workers:
            worker.wait_for_log(_REGISTERED, deadline)

    def _worker_argv(self, index: int) -> list[str]:
        work = self.workdir / f"worker-{index}"
        work.mkdir(exist_ok=True)
        return [
            *self._spark_class, "org.apache.spark.deploy.worker.Worker", "--host", HOST, "--port", "0",
            "--webui-port", "0", "--cores", str(self.config.worker_cores),
            "--memory", f"{self.config.worker_memory_mb}m", "--work-dir", str(work),
            "--properties-file", str(self._properties), self.master_url,
        ]  # fmt: skip

    def supervise(self, now: float) -> list[str]:
        """Start again a worker that died (after the restart delay); returns what was done, for the log."""
        notes = []
        for worker in self.workers:
            if worker.alive or self.config.restart_delay_s < 0:
                continue
            if worker.died_at is None:
                worker.died_at = now
                worker.signal_group(signal.SIGKILL)  # its executors go with it, as with a lost host
                notes.append(f"spark {worker.name} died (exit {worker.popen and worker.popen.returncode})")
            elif now - worker.died_at >= self.config.restart_delay_s:
                worker.start()
                notes.append(f"spark {worker.name} started again (pid {worker.pid})")
        return notes

    def describe(self) -> dict[str, object]:
        """The cluster as the ``spark_cluster`` event announces it."""
        return {
            "master": self.master_url,
            "workers": [{"index": i, "pid": w.pid} for i, w in enumerate(self.workers, start=1)],
            "dir": str(self.workdir),
        }

    def submit_argv(self, program: Path, args: Sequence[str]) -> list[str]:
        """``spark-submit`` of ``program`` to this cluster in client mode (the driver runs here)."""
        config = self.config
        confs = {
            "spark.executor.cores": config.worker_cores,
            "spark.executor.memory": f"{config.executor_memory_mb}m",
            "spark.cores.max": config.workers * config.worker_cores,
            "spark.driver.host": HOST,
            "spark.driver.bindAddress": HOST,
            "spark.ui.enabled": "false",
        }
        argv = [
            str(self._home / "bin" / "spark-submit"),
            "--master",
            self.master_url,
            "--deploy-mode",
            "client",
        ]
        for key, value in confs.items():
            argv += ["--conf", f"{key}={value}"]
        return [*argv, str(program), *args]

    def stop(self) -> None:
        """Stop the workers, then the master (SIGTERM, then SIGKILL after :data:`STOP_WAIT_S`)."""
        deadline = time.monotonic() + STOP_WAIT_S
        for daemon in [*self.workers, self.master]:
            daemon.stop(deadline)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        alive = sum(1 for w in self.workers if w.alive)
        return f"<LocalCluster [{self.master_url or 'not started'}, workers={alive}/{len(self.workers)}]>"
