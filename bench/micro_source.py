"""Micro-benchmark of the plain source: CPU µs per message, generating and sending.

``python -m feedha.bench.micro_source [--rate R] [--seconds S] [--repeat N]`` prints
one JSON object. The source is configured as ``bench throughput`` runs it
(one stream ``A-Z``, 200 symbols, seed 7; every message sent when due). Cases:

* ``generate``: ``SymbolModel`` alone, in-process, ``rate * TURN_S`` messages
  at a time, about what falls due per turn of the send loop at ``--rate``
  (``generate``; one by one through the iterator for a model without it);
  best of ``--repeat``.
* ``next``: the model's iterator, one ``GeneratedMessage`` at a time.
* ``source_process``: a real ``feedha source`` subprocess paced at
  ``--rate`` into a SUB that only counts; its CPU time
  (``psutil``, all threads) per message received between the first and the
  last sample (startup and exit excluded), its share of a core, and what its
  summary says it kept (``sent_rate``, ``forgiven``: messages it gave up on
  because it fell more than 50 ms behind).
* ``bare_send``: the reference: the same frames (same sizes, as many
  messages per frame), pre-built, sent by a bare pyzmq PUB, thread CPU time
  per message.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

RATE: Final = 150_000.0
SECONDS: Final = 4.0
REPEAT: Final = 5
TURN_S: Final = 0.0001  # a turn of the send loop under load: a short sleep's overshoot here, ~0.1 ms
STREAM: Final = "A-Z"
SYMBOLS: Final = 200
SEED: Final = 7
MESSAGES: Final = 100_000
REPO: Final = Path(__file__).resolve().parents[1]


def _best(run: Callable[[], float], repeat: int) -> float:
    return min(run() for _ in range(repeat))


def _module(script: str | None) -> Any:
    """The plain source: this checkout's package, or another copy of it (A/B runs).

    ``script`` is an older checkout's ``plain_source/`` package directory
    (from before the ``feedha`` namespace: imported as ``plain_source`` from
    its parent, so call this before anything imports that name), or an older
    single-file ``plain_source.py`` (loaded under another name).
    """
    if not script:
        from feedha import plain_source

        return plain_source
    import importlib
    import importlib.util

    if Path(script).is_dir():
        package = Path(script).resolve()
        if package.name != "plain_source":
            raise SystemExit(f"--source-script: a package directory must be named plain_source: {script}")
        sys.path.insert(0, str(package.parent))
        module = importlib.import_module("plain_source")
        if Path(module.__file__ or "").parent != package:
            raise SystemExit(f"--source-script: plain_source was already imported from {module.__file__}")
        return module
    spec = importlib.util.spec_from_file_location("_plain_source_under_test", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _model(module: Any = None) -> Any:
    module = module or _module(None)
    return module.SymbolModel(
        streams=(STREAM,), symbol_count=SYMBOLS, seed=SEED, epoch_ns=1_700_000_000_000_000_000, step_ns=6_666
    )


def _generate_case(module: Any, messages: int, per_turn: int) -> Callable[[], float]:
    # A turn's messages at a time, as the send loop asks for them (one by one
    # through the iterator where the model has no batch API).
    def run() -> float:
        model = _model(module)
        batch = getattr(model, "generate", None)
        started = time.thread_time()
        for _ in range(0, messages, per_turn):
            if batch is not None:
                batch(per_turn)
            else:
                for _ in range(per_turn):
                    next(model)
        return (time.thread_time() - started) * 1e6 / (-(-messages // per_turn) * per_turn)

    return run


def _next_case(module: Any, messages: int) -> Callable[[], float]:
    def run() -> float:
        model = _model(module)
        started = time.thread_time()
        for _ in range(messages):
            next(model)
        return (time.thread_time() - started) * 1e6 / messages

    return run


def _frames(messages: int, per_frame: int) -> list[bytes]:
    model = _model()
    data = [next(model).data for _ in range(messages)]
    return [b"".join(data[i : i + per_frame]) for i in range(0, messages, per_frame)]


def _bare_send_case(messages: int, per_frame: int) -> Callable[[], float]:
    import zmq

    frames = _frames(messages, per_frame)
    topic = STREAM.encode()

    def run() -> float:
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        pub, sub = ctx.socket(zmq.PUB), ctx.socket(zmq.SUB)
        try:
            pub.sndhwm, sub.rcvhwm, pub.linger, sub.linger = 0, 0, 0, 0
            sub.setsockopt(zmq.SUBSCRIBE, b"")
            sub.connect(f"tcp://127.0.0.1:{pub.bind_to_random_port('tcp://127.0.0.1')}")
            while True:  # joined once a probe arrives
                pub.send_multipart((topic, b"probe"))
                if sub.poll(10):
                    break
            send = pub.send_multipart
            started = time.thread_time()
            for frame in frames:
                send((topic, frame))
            elapsed = time.thread_time() - started
        finally:
            pub.close(linger=0)
            sub.close(linger=0)
            ctx.term()
        return elapsed * 1e6 / messages

    return run


def _start_source(rate: float, seconds: float, script: str | None) -> subprocess.Popen[str]:
    # The plain source at `rate` for `seconds` (or `script`: another checkout's, to compare with).
    import os

    command = [sys.executable, "-m", "feedha.plain_source"]
    path = [str(REPO)]
    if script and Path(script).is_dir():
        command = [sys.executable, "-m", "plain_source"]  # an older checkout's top-level package
        path.insert(0, str(Path(script).resolve().parent))
    elif script:
        command = [sys.executable, script]
    return subprocess.Popen(
        [
            *command,
            *("--streams", STREAM, "--symbols", str(SYMBOLS), "--seed", str(SEED)),
            *("--rate", str(rate), "--seconds", str(seconds)),
            *("--wait-subscribers", "1", "--linger-ms", "10000"),
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(path)},
        stdout=subprocess.PIPE,
        text=True,
    )


def _source_process(rate: float, seconds: float, script: str | None) -> dict[str, float]:
    import psutil
    import zmq

    proc = _start_source(rate, seconds, script)
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    try:
        assert proc.stdout is not None
        endpoints = json.loads(proc.stdout.readline())["endpoints"]
        sub.rcvhwm, sub.linger = 0, 0
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.connect(endpoints[STREAM])
        ps = psutil.Process(proc.pid)
        received = 0
        # (cpu, wall, received) at the first message and at the latest sample;
        # the SUB only counts (bytes.count, C), so it keeps up.
        first: tuple[float, float, int] | None = None
        last: tuple[float, float, int] | None = None
        next_sample = 0.0
        recv = sub.recv_multipart
        while True:
            if sub.poll(200):
                received += recv()[1].count(b"8=FIX")
                now = time.monotonic()
                if now >= next_sample:
                    next_sample = now + 0.1
                    times = ps.cpu_times()
                    last = (times.user + times.system, now, received)
                    first = first or last
            elif proc.poll() is not None:
                break
        summary = json.loads(proc.communicate(timeout=30)[0].strip().splitlines()[-1])
    finally:
        sub.close(linger=0)
        ctx.term()
        if proc.poll() is None:
            proc.kill()
    assert first is not None and last is not None
    window = last[2] - first[2]
    return {
        "us_per_message": round((last[0] - first[0]) * 1e6 / max(window, 1), 4),
        "cpu_share": round((last[0] - first[0]) / max(last[1] - first[1], 1e-9), 3),
        "sent_rate": round(summary["sent"] / max(summary["elapsed_s"], 1e-9), 1),
        "forgiven": summary["forgiven"],
        "received": received,
        "sent": summary["sent"],
    }


def main(argv: Sequence[str]) -> int:
    """Run the cases and print one JSON object (µs of CPU per message)."""
    parser = argparse.ArgumentParser(
        prog="python -m feedha.bench.micro_source", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rate", type=float, default=RATE, help="msg/s offered by the source process")
    parser.add_argument("--seconds", type=float, default=SECONDS)
    parser.add_argument("--messages", type=int, default=MESSAGES, help="per in-process case")
    parser.add_argument("--repeat", type=int, default=REPEAT)
    parser.add_argument("--cases", default="generate,next,bare_send,source_process")
    parser.add_argument(
        "--source-script",
        help="run this plain_source/ package directory, or an older single-file plain_source.py, "
        "instead of the package's (A/B runs)",
    )
    args = parser.parse_args(list(argv))
    module = _module(args.source_script)  # first: a package copy must be the one imported
    from feedha.plain_source import MAX_BATCH

    per_turn = max(1, int(args.rate * TURN_S))
    per_frame = min(per_turn, MAX_BATCH)
    results: dict[str, Any] = {}
    for name in args.cases.split(","):
        if name == "generate":
            results[name] = round(_best(_generate_case(module, args.messages, per_turn), args.repeat), 4)
        elif name == "next":
            results[name] = round(_best(_next_case(module, args.messages // 10), args.repeat), 4)
        elif name == "bare_send":
            results[name] = round(_best(_bare_send_case(args.messages, per_frame), args.repeat), 4)
        elif name == "source_process":
            results[name] = _source_process(args.rate, args.seconds, args.source_script)
        else:
            parser.error(f"unknown case {name!r}")
    model = _model()
    mean_bytes = sum(len(next(model).data) for _ in range(2000)) / 2000
    print(
        json.dumps(
            {
                "unit": "us_cpu_per_message",
                "results": results,
                "params": {
                    "rate": args.rate,
                    "turn_s": TURN_S,
                    "messages_per_turn": per_turn,
                    "messages_per_frame": per_frame,
                    "mean_message_bytes": round(mean_bytes, 1),
                    "repeat": args.repeat,
                },
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
