"""The configuration of ``feedha feed``: its options, checked, as one frozen dataclass."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from feedha.spark_feed import model
from feedha.transport.backpressure import DEFAULT_MAX_STALL_S

DEFAULT_RATE: Final = 20_000
DEFAULT_TRIGGER_MS: Final = 1000
DEFAULT_BASE_PORT: Final = 5601
SNDHWM: Final = 16  # frames (of up to --frame-messages each) queued per subscriber before a send waits


@dataclass(frozen=True, slots=True, kw_only=True)
class FeedConfig:
    """Everything ``feedha feed`` needs, built once from argv."""

    source: str = "synthetic"
    rate: int = DEFAULT_RATE
    trigger_ms: int = DEFAULT_TRIGGER_MS
    unpaced: bool = False
    symbols: int = model.DEFAULT_SYMBOLS
    streams: tuple[model.StreamSpec, ...] = model.parse_streams(model.DEFAULT_STREAMS)
    seed: int = model.DEFAULT_SEED
    checkpoint: str = ""
    endpoints: tuple[tuple[str, str], ...] = ()
    seconds: float | None = None
    master: str | None = "local[*]"
    local_workers: int = 2
    partitions: int = 2
    sender: str = "FEED"
    frame_messages: int = 500
    sndhwm: int = SNDHWM
    max_stall_s: float = DEFAULT_MAX_STALL_S
    max_rate: float = 0.0
    wait_subscribers: int = 0
    wait_timeout_s: float = 60.0
    replay_dir: str = ""
    replay_format: str = "csv"
    files_per_trigger: int = 1
    quiet: bool = False
    spark_log_level: str = "ERROR"
    log_level: str = "INFO"  # --quiet lowers it to WARNING
    log_format: str = "text"
    curve_key: str = ""  # the source's CURVE key pair: the streams are CURVE servers
    allowed_keys: tuple[str, ...] = ()  # files of the public keys admitted (the adapters')
    insecure: bool = False  # without keys off loopback, or with half of them

    def __post_init__(self) -> None:
        if self.source not in ("synthetic", "replay"):
            raise ValueError(f"source must be synthetic or replay: {self.source!r}")
        if self.rate <= 0 or self.trigger_ms <= 0:
            raise ValueError(f"rate and trigger-ms must be > 0: {self.rate}, {self.trigger_ms}")
        if self.sndhwm < 1 or not self.max_stall_s > 0:
            raise ValueError(f"sndhwm must be >= 1 and max-stall > 0: {self.sndhwm}, {self.max_stall_s}")
        if self.rows_per_batch < 1:
            raise ValueError(
                f"rate x trigger interval gives no row per batch: {self.rate}/s x {self.trigger_ms} ms"
            )
        if not self.checkpoint:
            raise ValueError("--checkpoint is required")
        if not 1 <= self.local_workers <= 16:
            raise ValueError(f"--local-workers must be 1..16: {self.local_workers}")
        if self.source == "replay" and not self.replay_dir:
            raise ValueError("--replay-dir is required with --source replay")
        names = {s.name for s in self.streams}
        unknown = [name for name, _ in self.endpoints if name not in names]
        if unknown:
            raise ValueError(f"--endpoint names no source stream: {unknown} (streams: {sorted(names)})")
        if not self.insecure:
            self._check_secure()

    def _check_secure(self) -> None:
        # Secure unless told otherwise (docs/security.md): all keys or none, and none only on loopback.
        from feedha.transport.locality import is_local_endpoint

        if bool(self.curve_key) != bool(self.allowed_keys):
            raise ValueError(
                "partial key setup: give --curve-key (the source's key pair) and --allow-key (the "
                "adapters' public keys) together, or --insecure"
            )
        exposed = [
            self.endpoint_of(stream)
            for stream in self.streams
            if not self.curve_key and not is_local_endpoint(self.endpoint_of(stream))
        ]
        if exposed:
            raise ValueError(
                f"refusing to publish the feed without keys off loopback ({', '.join(exposed)}): give "
                "--curve-key and --allow-key, or --insecure"
            )

    @property
    def rows_per_batch(self) -> int:
        """Rows the synthetic source makes per trigger."""
        return self.rate * self.trigger_ms // 1000

    def endpoint_of(self, stream: model.StreamSpec) -> str:
        """The stream's bind endpoint: ``--endpoint`` or ``tcp://127.0.0.1:<5600 + number>``."""
        return dict(self.endpoints).get(
            stream.name, f"tcp://127.0.0.1:{DEFAULT_BASE_PORT - 1 + stream.number}"
        )


def parse_args(argv: list[str]) -> FeedConfig:
    """Build the config from the command line, the ``--config`` file and ``FEEDHA_*`` variables.

    Raises:
        ValueError: a bad value (named in the message).
        SystemExit: ``--help`` (0) or an argument argparse refuses (2, with the usage).
    """
    from feedha import settings

    a = settings.parse(build_parser(), argv, no_env=frozenset({"insecure"})).args
    return _config(a)


def build_parser() -> argparse.ArgumentParser:
    """The ``feedha feed`` argument parser."""
    from feedha import settings

    p = argparse.ArgumentParser(
        prog="feedha feed",
        description="The PySpark Structured Streaming feed source. Every option is also a key of the "
        "--config file and a FEEDHA_<OPTION> variable.",
    )
    add = p.add_argument
    _market_arguments(add)
    _job_arguments(add)
    _publish_arguments(add)
    _replay_arguments(add)
    _security_arguments(add)
    add("--quiet", action="store_true", help="no progress lines on stderr")
    add("--spark-log-level", default="ERROR", choices=("ERROR", "WARN", "INFO"))
    settings.add_common_arguments(p, log_level="INFO")
    return p


def _market_arguments(add: Callable[..., Any]) -> None:
    # What the job generates: the source, its rate and trigger, the market.
    add("--source", choices=("synthetic", "replay"), default="synthetic")
    add("--rate", type=int, default=DEFAULT_RATE, help="synthetic rows/s (default %(default)s)")
    add("--trigger-ms", type=int, default=DEFAULT_TRIGGER_MS, help="trigger interval (default %(default)s)")
    add("--unpaced", action="store_true", help="trigger back to back (benchmarks)")
    add("--symbols", type=int, default=model.DEFAULT_SYMBOLS)
    add("--streams", default=model.DEFAULT_STREAMS, help="e.g. 'A-M,N-Z' or 'EQ1=A-F,EQ2=G-Z'")
    add("--seed", type=int, default=model.DEFAULT_SEED)


def _job_arguments(add: Callable[..., Any]) -> None:
    # Where the job checkpoints and publishes, for how long, on which Spark master.
    add("--checkpoint", required=True, help="checkpoint directory (restart resumes from it)")
    add("--endpoint", action="append", default=[], metavar="NAME=URL", help="bind URL of a stream")
    add("--seconds", type=float, default=None, help="stop after this many seconds")
    add(
        "--master",
        "--spark-master",
        dest="master",
        default="local[*]",
        help="Spark master: local[N], spark://HOST:PORT, local-cluster (a standalone master and "
        "--local-workers workers started on this machine, the job submitted to them with spark-submit), "
        "or '' to take it from spark-submit (default %(default)s)",
    )
    add(
        "--local-workers", type=int, default=2, help="workers of --master local-cluster (default %(default)s)"
    )
    add("--partitions", type=int, default=2, help="rate partitions and shuffle partitions")


def _publish_arguments(add: Callable[..., Any]) -> None:
    # The FIX frames, and the subscribers: waiting for them, what a slow one costs.
    add("--sender", default="FEED", help="SenderCompID, tag 49")
    add("--frame-messages", type=int, default=500, help="FIX messages per ZeroMQ frame")
    add(
        "--sndhwm",
        type=int,
        default=SNDHWM,
        help="frames queued per subscriber before a send waits for it (default %(default)s): the job "
        "slows to its slowest adapter and reports the rate it achieved instead of dropping",
    )
    add(
        "--max-stall",
        type=float,
        default=DEFAULT_MAX_STALL_S,
        metavar="SECONDS",
        help="the longest a send waits for a subscriber that reads nothing; then it goes past it and "
        "that adapter misses a stretch (a gap it counts, its group repairs) (default %(default)s)",
    )
    add("--max-rate", type=float, default=0.0, help="publisher-side pacing, messages/s (0 = off)")
    add("--wait-subscribers", type=int, default=0, help="XPUB: wait for N subscribers per stream")
    add("--wait-timeout", type=float, default=60.0)


def _replay_arguments(add: Callable[..., Any]) -> None:
    # The replay source: a directory of tick files.
    add("--replay-dir", default="", help="directory of tick files (see docs/spark-feed.md)")
    add("--replay-format", choices=("csv", "parquet"), default="csv")
    add("--files-per-trigger", type=int, default=1)


def _security_arguments(add: Callable[..., Any]) -> None:
    # CURVE: who the source is and who may subscribe.
    add(
        "--curve-key",
        default="",
        help="the source's CURVE key pair (`feedha keys new FILE`): the streams are CURVE servers and "
        "adapters verify the source with FILE.pub (their --source-key)",
    )
    add(
        "--allow-key",
        action="append",
        default=[],
        metavar="FILE",
        help="public keys that may subscribe (the adapters' .pub files; repeatable; needs --curve-key)",
    )
    add("--insecure", action="store_true", help="publish without keys off loopback")


def _config(a: argparse.Namespace) -> FeedConfig:
    endpoints = []
    for item in a.endpoint:
        name, sep, url = item.partition("=")
        if not sep or not url:
            raise ValueError(f"--endpoint must be NAME=URL: {item!r}")
        endpoints.append((name, url))
    return FeedConfig(
        source=a.source, rate=a.rate, trigger_ms=a.trigger_ms, unpaced=a.unpaced, symbols=a.symbols,
        streams=model.parse_streams(a.streams), seed=a.seed, checkpoint=a.checkpoint,
        endpoints=tuple(endpoints), seconds=a.seconds, master=a.master or None, local_workers=a.local_workers,
        partitions=a.partitions,
        sender=a.sender, frame_messages=a.frame_messages, sndhwm=a.sndhwm, max_stall_s=a.max_stall,
        max_rate=a.max_rate,
        wait_subscribers=a.wait_subscribers, wait_timeout_s=a.wait_timeout, replay_dir=a.replay_dir,
        replay_format=a.replay_format, files_per_trigger=a.files_per_trigger, quiet=a.quiet,
        spark_log_level=a.spark_log_level, log_level=a.log_level, log_format=a.log_format,
        curve_key=a.curve_key, allowed_keys=tuple(a.allow_key), insecure=a.insecure,
    )  # fmt: skip
