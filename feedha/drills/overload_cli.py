"""``feedha drill overload``'s command line: its options, its run, its exit code (feedha.drills.overload)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from feedha.adapter.formats.capture_registry import default_capture
from feedha.adapter.formats.registry import FORMATS
from feedha.drills import overload
from feedha.drills.output import output_arguments, run_logged

__all__ = ["add_arguments", "main"]


def add_arguments(sub: Any) -> None:
    """The ``overload`` sub-command's options."""
    parser = sub.add_parser(
        "overload",
        help="a capture at three times the channel's capacity for 10 s, then at half of it, the active "
        "killed in the burst: nothing lost or unaccounted, the backlog worked off, the books right",
        description=overload.__doc__,
        epilog="example: feedha drill overload --format itch50 --file day.itch --json  (exit 0: passed; "
        "1: a check failed or the run broke, the components' logs named; 2: a bad option)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--file", type=Path, required=True, help="the capture (docs/converters.md)")
    parser.add_argument(
        "--format",
        choices=sorted(FORMATS),
        default=default_capture("overload"),
        help="the capture's format, as the adapters' --format (default: %(default)s)",
    )
    parser.add_argument(
        "--capacity", type=float, help="the channel's capacity in messages/s (default: measured first)"
    )
    parser.add_argument("--burst-factor", type=float, default=3.0, help="burst rate / capacity (default: 3)")
    parser.add_argument("--burst-seconds", type=float, default=10.0, help="the burst's length (default: 10)")
    parser.add_argument(
        "--calm-factor", type=float, default=0.5, help="rate after the burst / capacity (default: 0.5)"
    )
    parser.add_argument("--backups", type=int, default=2, help="backups besides the active (default: 2)")
    parser.add_argument("--book-depth", type=int, default=10, help="levels a side (default: 10)")
    parser.add_argument(
        "--kill",
        choices=("active", "none"),
        default="active",
        help="SIGKILL the active in the burst (default)",
    )
    parser.add_argument(
        "--kill-after", type=float, default=5.0, help="seconds into the burst to kill (default: 5)"
    )
    parser.add_argument(
        "--measure-seconds", type=float, default=8.0, help="the capacity run's length (default: 8)"
    )
    parser.add_argument(
        "--no-reference",
        action="store_true",
        help="do not convert the capture alone to compare the client's books with (large captures: minutes)",
    )
    output_arguments(parser)


def main(args: argparse.Namespace) -> int:
    """Run ``feedha drill overload`` with parsed ``args``; 0 when nothing was lost, unaccounted or wrong."""
    try:
        options = overload.OverloadOptions(
            file=args.file, input_format=args.format, capacity=args.capacity, burst_factor=args.burst_factor,
            burst_s=args.burst_seconds, calm_factor=args.calm_factor, backups=args.backups,
            depth=args.book_depth, kill=args.kill, kill_after_s=args.kill_after,
            measure_s=args.measure_seconds, reference=not args.no_reference,
        )  # fmt: skip
    except ValueError as exc:
        print(f"feedha drill overload: {exc}", file=sys.stderr)
        return 2
    result = run_logged(
        "overload",
        args,
        lambda log: overload.run_overload(options, log),
        errors=(OSError, ValueError),
        text=_lines,
    )
    if result is None:
        return 1
    return 0 if result["passed"] else 1


def _lines(result: dict[str, Any]) -> list[str]:
    # The books, stats and accounting are for --json: too long to read as text.
    return [
        f"{key:<18} {value}" for key, value in result.items() if key not in ("books", "stats", "accounting")
    ]
