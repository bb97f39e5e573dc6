"""Benchmark: the rate the Spark feed job delivers to a ZeroMQ SUB, beside the bare PUB->SUB ceiling.

``python -m feedha.bench.spark_feed [--json] [--quick]`` or ``feedha bench spark_feed``.

Runs ``spark_feed.job`` as a child process (``--unpaced``: micro-batches of
:data:`ROWS_PER_BATCH` rows back to back, ``local[*]``), counts FIX messages
arriving on one SUB socket connected to every source stream over a window
after warm-up, and divides by the bare pyzmq PUB->SUB rate (100-byte
payloads, one ZeroMQ message each) measured in the same run by
:func:`bench.ceiling.run_pair`, the faster of one run before and one after
the job (so a loaded machine lowers the ratio rather than flattering it). A
second, paced run (not with ``--quick``) at :data:`LATENCY_RATE` msg/s with a
:data:`LATENCY_TRIGGER_MS` trigger reports the event->publish latency of the
batches from the job's summary: the time the last frame of a batch was
handed to ZeroMQ minus the event time of its newest tick (``batch_lag_ms``:
of its oldest). The job publishes a tick only once its event time has come,
so the figure cannot read below zero (it once read -99.2 ms: see
:mod:`spark_feed._run`). Beside it, in the same run, the plain source's own
event->publish at the same rate (``plain_source_publish_us``: the time each
send was handed to ZeroMQ minus the event time of the newest and of the
oldest message it carried, from the source's summary), as a figure of its own
(``plain_source_publish_p50``).
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Final

from feedha.bench.common import Figure, figure, format_figure
from feedha.bench.pipeline import open_log

STREAMS: Final = ("A-M", "N-Z")
ROWS_PER_BATCH: Final = 500_000  # unpaced: the per-batch cost (~0.1-0.3 s here) spread over many rows
LATENCY_RATE: Final = 10_000
LATENCY_TRIGGER_MS: Final = 200
PLAIN_SOURCE_S: Final = 5.0  # the plain source's run beside the paced job


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Counter:
    """Counts FIX messages (their ``10=`` trailers) arriving on a SUB, on a thread."""

    def __init__(self, endpoints: list[str]) -> None:
        import zmq

        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.SUB)
        self._socket.setsockopt(zmq.RCVHWM, 0)
        self._socket.setsockopt(zmq.LINGER, 0)
        for endpoint in endpoints:
            self._socket.connect(endpoint)
        self._socket.setsockopt(zmq.SUBSCRIBE, b"")
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._socket.poll(100):
                _topic, payload = self._socket.recv_multipart(copy=False)
                self.count += bytes(payload.buffer).count(b"\x0110=")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._socket.close()
        self._context.term()


class JobFailed(RuntimeError):
    """The Spark job exited before it delivered anything (its stderr is in ``log``)."""

    def __init__(self, code: int | None, log: str) -> None:
        super().__init__(f"spark_feed.job exited with code {code} before delivering anything; its log: {log}")
        self.code = code
        self.log = log


def run_job(*, rate: int, trigger_ms: int, unpaced: bool, warmup_s: float, window_s: float) -> dict[str, Any]:
    """Run the job; return the measured delivery rate and the job's JSON summary.

    A job that dies before its first message (a start-up failure: a port
    taken between probing and binding, a JVM that did not come up) is
    retried once; a second such failure raises :class:`JobFailed`, so the
    benchmark crashes loudly instead of reporting 0 msg/s.
    """
    try:
        return _run_job_once(
            rate=rate, trigger_ms=trigger_ms, unpaced=unpaced, warmup_s=warmup_s, window_s=window_s
        )
    except JobFailed as exc:
        print(f"bench spark_feed: {exc}; retrying once", file=sys.stderr, flush=True)
    return _run_job_once(
        rate=rate, trigger_ms=trigger_ms, unpaced=unpaced, warmup_s=warmup_s, window_s=window_s
    )


def _run_job_once(
    *, rate: int, trigger_ms: int, unpaced: bool, warmup_s: float, window_s: float
) -> dict[str, Any]:
    endpoints = [f"tcp://127.0.0.1:{_free_port()}" for _ in STREAMS]
    counter = _Counter(endpoints)
    with tempfile.TemporaryDirectory(prefix="bench-spark-feed-") as tmp:
        args = [sys.executable, "-m", "feedha.spark_feed.job", "--checkpoint", str(Path(tmp) / "ckpt"),
                "--rate", str(rate), "--trigger-ms", str(trigger_ms), "--quiet",
                "--master", "local[*]"]  # fmt: skip
        args += ["--unpaced"] if unpaced else []
        for name, endpoint in zip(STREAMS, endpoints, strict=True):
            args += ["--endpoint", f"{name}={endpoint}"]
        log = open_log("spark-feed")  # the job's stderr, kept for a post-mortem
        # The installed package, run from the temp dir: nothing of a clone's layout on the path.
        job = subprocess.Popen(args, cwd=tmp, stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            deadline = time.monotonic() + 600
            while counter.count == 0 and time.monotonic() < deadline and job.poll() is None:
                time.sleep(0.1)  # polling for the first message, bounded
            if counter.count == 0:
                raise JobFailed(job.poll(), log.name)
            time.sleep(warmup_s)  # let the JIT settle before the window
            start_count, start, start_cpu = counter.count, time.monotonic(), _tree_cpu(job.pid)
            time.sleep(window_s)
            received, elapsed = counter.count - start_count, time.monotonic() - start
            cpu = {part: used - start_cpu.get(part, 0.0) for part, used in _tree_cpu(job.pid).items()}
            job.send_signal(signal.SIGTERM)
            stdout, _ = job.communicate(timeout=120)
        finally:
            if job.poll() is None:
                job.kill()
                job.wait()
            counter.close()
            log.close()
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    summary = json.loads(lines[-1]) if lines else {}
    return {
        "rate": received / elapsed,
        "received": received,
        "window_s": round(elapsed, 1),
        "cpu": {
            part: {
                "cores": round(used / elapsed, 2),
                "us_per_msg": round(1e6 * used / received, 2) if received else None,
            }
            for part, used in cpu.items()
        },  # fmt: skip
        "summary": summary,
    }


def plain_source_publish(*, rate: float, seconds: float) -> dict[str, Any]:
    """Run the plain source at ``rate`` into one counting SUB; return its event->publish delays (µs).

    Returns:
        The source summary's ``publish_latency_us`` (``newest``/``oldest`` percentiles, ``sends``),
        and ``received`` by the SUB.
    """
    from feedha.procs import JsonProcess

    args = ["--streams", ",".join(STREAMS), "--rate", str(rate), "--seconds", str(seconds),
            "--wait-subscribers", "1", "--linger-ms", "2000"]  # fmt: skip
    with open_log("spark-feed-plain-source") as log:
        source = JsonProcess.python("plain-source", "feedha.plain_source", args, log=log)
        counter = None
        try:
            endpoints = source.wait_for(lambda e: "endpoints" in e, 30)["endpoints"]
            counter = _Counter([endpoints[name] for name in STREAMS])
            summary = source.wait_for(lambda e: "sent" in e, seconds + 60)
            deadline = time.monotonic() + 5
            while counter.count < summary["sent"] and time.monotonic() < deadline:
                time.sleep(0.05)  # polling for the tail still in flight, bounded
        finally:
            source.kill()
            if counter is not None:
                counter.close()
    return {"publish_latency_us": summary.get("publish_latency_us"), "received": counter.count}


def _tree_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of the job: its Python driver and the JVM (and anything) under it."""
    import psutil

    try:
        root = psutil.Process(pid)
        python = root.cpu_times()
        rest = 0.0
        for child in root.children(recursive=True):
            try:
                times = child.cpu_times()
                rest += times.user + times.system
            except psutil.Error:
                continue
    except psutil.Error:
        return {}
    return {"python": python.user + python.system, "jvm": rest}


def run(quick: bool) -> list[Figure]:
    """Measure the sustained delivery rate (and, unless quick, the batch latency).

    Args:
        quick: shorter windows, no latency run.

    Returns:
        The figures.
    """
    from feedha.bench.ceiling import run_pair

    count = 100_000 if quick else 400_000
    ceilings = [run_pair(count=count)["rate"]]
    window = 15.0 if quick else 40.0
    result = run_job(rate=ROWS_PER_BATCH, trigger_ms=1000, unpaced=True, warmup_s=5.0, window_s=window)
    ceilings.append(run_pair(count=count)["rate"])
    summary = result.pop("summary")
    figures = [
        figure(
            name="spark_feed_throughput",
            value=result["rate"],
            unit="msg/s",
            ceiling=max(ceilings),
            params={
                "master": "local[*]",
                "rows_per_batch": ROWS_PER_BATCH,
                "frame_messages": 500,
                "streams": len(STREAMS),
                "received": result["received"],
                "window_s": result["window_s"],
                "ceiling_runs": [round(c, 1) for c in ceilings],
                "handler_ms": summary.get("handler_ms", {}),
                "collect_ms": summary.get("collect_ms", {}),
                "encoded_ahead": summary.get("encoded_ahead"),
                "cpu": result["cpu"],
            },
        )
    ]
    if not quick:
        paced = run_job(
            rate=LATENCY_RATE, trigger_ms=LATENCY_TRIGGER_MS, unpaced=False, warmup_s=10.0, window_s=30.0
        )
        figures += _latency_figures(paced)
    return figures


def _latency_figures(paced: dict[str, Any]) -> list[Figure]:
    latency = paced["summary"].get("batch_latency_ms", {})
    if latency and latency["p50"] < 0:
        raise RuntimeError(f"spark_feed: event -> publish below zero, a measuring defect: {latency}")
    plain = plain_source_publish(rate=LATENCY_RATE, seconds=PLAIN_SOURCE_S)
    delays = plain["publish_latency_us"] or {}
    params = {
        "rate": LATENCY_RATE,
        "trigger_ms": LATENCY_TRIGGER_MS,
        "delivered": round(paced["rate"]),
        "batch_latency_ms": latency,
        "batch_lag_ms": paced["summary"].get("batch_lag_ms", {}),
        "handler_ms": paced["summary"].get("handler_ms", {}),
        "collect_ms": paced["summary"].get("collect_ms", {}),
        "plain_source_publish_us": delays,
        "plain_source_received": plain["received"],
        "what": "event time of the newest tick of a batch (Spark) or of a send (plain source) "
        "-> handed to ZeroMQ",
    }
    newest = delays.get("newest", {})
    return [
        figure(
            name="spark_feed_batch_latency_p50",
            value=float(latency.get("p50", 0.0)),
            unit="ms",
            ceiling=None,
            params=params,
        ),
        figure(
            name="plain_source_publish_p50",
            value=float(newest.get("p50", 0.0)),
            unit="us",
            ceiling=None,
            params=params,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    """``python -m feedha.bench.spark_feed [--json] [--quick]``."""
    parser = argparse.ArgumentParser(prog="feedha bench spark_feed", description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    for item in run(quick=args.quick):
        print(format_figure(item, as_json=args.json), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
