"""``feedha bench NAME|all [--json] [--quick] [--results DIR]``: run benchmarks, print one figure per line.

``throughput`` also takes the production shape of its third ramp:
``--journal/--no-journal`` (default: journals with ``--fsync batch``) and
``--backups N`` (default 2); ``latency`` takes ``--rounds N`` (each rate's arms
run N times in turn, each percentile the median of the rounds'); ``itch50_day``
takes ``--messages N`` (the day's size; it is not part of ``all``: a million
messages take minutes, run it alone).

Every benchmark starts its own processes on loopback, is bounded in time and
measures its ceiling (the bare pyzmq PUB→SUB pair, :mod:`bench.ceiling`) in
the same run. ``all`` also writes a markdown report, the raw figures and PNG
plots to the results folder. The exit code is non-zero only when a benchmark
crashed, a figure reports lost messages or books unequal to their
reference -- never for slowness. On a
terminal a progress bar on stderr shows which benchmark runs and how far the
run is (:mod:`bench.progress`); with ``--json`` nothing but the figures.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Final

from feedha.bench.common import MAX_LATENCY_ROUNDS, Figure, format_figure
from feedha.bench.progress import Progress

# name -> (module, function); the function takes ``quick: bool`` and returns a list of figures.
BENCHMARKS: Final[dict[str, tuple[str, str]]] = {
    "throughput": ("feedha.bench.throughput", "run"),
    "fanout": ("feedha.bench.fanout", "run"),
    "latency": ("feedha.bench.latency", "run"),
    "failover": ("feedha.bench.failover", "run"),
    "symbols": ("feedha.bench.symbols", "run"),
    "channels": ("feedha.bench.channels", "run"),
    "journal": ("feedha.bench.journal", "run"),
    "replay_time": ("feedha.bench.replay_time", "run"),
    "conflation": ("feedha.bench.conflation", "run"),
    "seal": ("feedha.bench.seal", "run"),
    "spark_feed": ("feedha.bench.spark_feed", "run"),
    "itch50_orders": ("feedha.bench.itch50", "run"),
    "itch50_day": ("feedha.bench.itch50_day", "run"),
}
# Run only by name, not by `all` (nor `all --quick`, which CI runs): minutes for a day of messages.
NOT_IN_ALL: Final = frozenset({"itch50_day"})
DEFAULT_RESULTS: Final = Path("results")
# itch50_day's --messages: past the stock directory (2,000 messages), at most what a capture holds.
MIN_DAY_MESSAGES: Final = 2_001
MAX_DAY_MESSAGES: Final = 20_000_000
MAX_BACKUPS: Final = 4  # a 2-core machine runs (backups + 1) adapters, a source and a client at once
# The benchmarks that take --hosts.
HOSTS_BENCHMARKS: Final = ("channels",)


def lost_in(item: Figure) -> int:
    """Messages a figure reports lost (0 when it does not say)."""
    lost = item["params"].get("lost", 0)
    return int(lost) if isinstance(lost, int | float) else 0


def main(argv: list[str]) -> int:
    """Run the named benchmark (or all) and print its figures.

    Args:
        argv: arguments after ``feedha bench``.

    Returns:
        0; 1 if a benchmark crashed, lost messages or ended with books unequal to its reference.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    options = _options(parser, args)
    names = [name for name in BENCHMARKS if name not in NOT_IN_ALL] if args.name == "all" else [args.name]
    figures: list[Figure] = []
    errors: list[str] = []
    started = time.monotonic()
    progress = Progress(
        names,
        stream=sys.stderr,
        enabled=not args.json,
        quick=args.quick,
        memory=args.results / ".durations.json",
    )
    try:
        for name in names:
            progress.start(name)
            items = _run_one(name, args.quick, errors, progress, **options.get(name, {}))
            progress.finish(name, ok=items is not None)
            for item in items or ():
                progress.clear_line()
                print(format_figure(item, as_json=args.json), flush=True)
            figures += items or []
    finally:
        progress.close()
    # Figures of one run share their parameters (e.g. the three failover figures): count each run once.
    runs = {json.dumps(item["params"], sort_keys=True, default=str): item for item in figures}
    lost = sum(lost_in(item) for item in runs.values())
    unequal = [item["name"] for item in runs.values() if item["params"].get("books_equal") is False]
    if args.name == "all":
        from feedha.bench.report import write_report

        report = write_report(figures, args.results, quick=args.quick, errors=errors)
        print(f"feedha bench: report in {report} ({time.monotonic() - started:.0f} s)", file=sys.stderr)
    for error in errors:
        print(f"feedha bench: crashed: {error}", file=sys.stderr)
    if lost:
        print(f"feedha bench: {lost} message(s) lost", file=sys.stderr)
    for name in unequal:
        print(f"feedha bench: {name}: books differ from the reference", file=sys.stderr)
    return 1 if errors or lost or unequal else 0


def build_parser() -> argparse.ArgumentParser:
    """The ``feedha bench`` argument parser."""
    parser = argparse.ArgumentParser(prog="feedha bench", description=__doc__)
    parser.add_argument("name", choices=[*BENCHMARKS, "all"], help="benchmark to run")
    parser.add_argument("--json", action="store_true", help="one JSON object per figure")
    parser.add_argument(
        "--quick", action="store_true", help="smaller runs (a smoke test, < 5 minutes for all)"
    )
    parser.add_argument(
        "--hosts",
        choices=("local", "netns"),
        help="channels: local (loopback, the default) or netns (each process on its own network-namespace "
        "host; root)",
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=DEFAULT_RESULTS,
        help="folder for the report of `all` (default: results/)",
    )
    shape = parser.add_argument_group("throughput's production-shape ramp (throughput_journal)")
    shape.add_argument(
        "--journal",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="every adapter journals with --fsync batch and serves replay (default: yes)",
    )
    shape.add_argument("--backups", type=int, default=2, help="backups per group (default: %(default)s)")
    day = parser.add_argument_group("itch50_day (not part of `all`)")
    day.add_argument(
        "--messages",
        type=int,
        help="the ITCH day's size, messages (default: 1,000,000; --quick 50,000; at most 20,000,000): "
        "played as fast as possible through an active and two backups with journals; prints msg/s, "
        "ratio_shape, CPU per message per process, bytes per live order and itch-book's rate on the "
        "same capture; checks nothing was lost and every book equals itch-book's",
    )
    latency = parser.add_argument_group("latency")
    latency.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run each rate's arms (bare hop, relay, the two models, pipeline, one adapter) this many times "
        "in turn and report each percentile's median over the rounds, every round's own figures in "
        f"the parameters: firmer ratios on a shared machine (1..{MAX_LATENCY_ROUNDS}; default: %(default)s)",
    )
    return parser


def _options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, dict[str, object]]:
    # Each benchmark's keyword arguments from the options, the options checked (exits 2 on a bad one).
    if not 0 <= args.backups <= MAX_BACKUPS:
        parser.error(f"--backups must be in 0..{MAX_BACKUPS}, got {args.backups}")
    if not 1 <= args.rounds <= MAX_LATENCY_ROUNDS:
        parser.error(f"--rounds must be in 1..{MAX_LATENCY_ROUNDS}, got {args.rounds}")
    if args.rounds != 1 and args.name not in ("latency", "all"):
        parser.error("--rounds applies to latency only")
    if args.messages is not None:
        if args.name != "itch50_day":
            parser.error("--messages applies to itch50_day only")
        if not MIN_DAY_MESSAGES <= args.messages <= MAX_DAY_MESSAGES:
            parser.error(f"--messages must be in {MIN_DAY_MESSAGES}..{MAX_DAY_MESSAGES}, got {args.messages}")
    options: dict[str, dict[str, object]] = {
        "throughput": {"journal": args.journal, "backups": args.backups},
        "latency": {"rounds": args.rounds},
        "itch50_day": {"messages": args.messages},
    }
    if args.hosts:
        if args.name not in (*HOSTS_BENCHMARKS, "all"):
            parser.error(f"--hosts applies to {', '.join(HOSTS_BENCHMARKS)} only")
        options |= {name: {"hosts": args.hosts} for name in HOSTS_BENCHMARKS}
    return options


def _run_one(
    name: str, quick: bool, errors: list[str], progress: Progress, **options: object
) -> list[Figure] | None:
    module_name, function_name = BENCHMARKS[name]
    try:
        run: Callable[..., list[Figure]] = getattr(importlib.import_module(module_name), function_name)
        return run(quick=quick, **options)
    except Exception as exc:  # noqa: BLE001 - report, go on with the other benchmarks, fail at the end
        progress.clear_line()
        traceback.print_exc(file=sys.stderr)
        errors.append(f"{name}: {type(exc).__name__}: {exc}")
        return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
