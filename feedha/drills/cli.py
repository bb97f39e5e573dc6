"""``feedha drill``: the drills' command line (failover, chaos, delayed, abuse, replay-time, conflate, ...).

The drills themselves are :mod:`feedha.drills.failover` (failover, with the network
faults), :mod:`feedha.drills.chaos` (a seeded schedule of faults under load),
:mod:`feedha.drills.delayed` (the delayed stream, purges and a failover),
:mod:`feedha.drills.abuse` (users with valid keys, and crowds without, against a
secure cluster), :mod:`feedha.drills.replay_time` (a window replayed by time) and
:mod:`feedha.drills.conflate` (conflated lines across a kill, a stalled subscriber).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from feedha import netns, transport
from feedha.adapter.formats.capture_registry import default_capture
from feedha.adapter.formats.registry import FORMATS
from feedha.drills import chaos, conflate, delayed, overload_cli, replay_time
from feedha.drills.failover import run_failover
from feedha.drills.group import DrillOptions
from feedha.drills.output import output_arguments, run_logged
from feedha.procs import ProcessError


def build_parser() -> argparse.ArgumentParser:
    from feedha.drills import failover as failover_drill

    parser = argparse.ArgumentParser(
        prog="feedha drill",
        description=failover_drill.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="drill", required=True)
    chaos.add_arguments(
        sub.add_parser(
            "chaos",
            help="a seeded schedule of faults (kill, stop, restart, poison, stalled subscriber, replay "
            "flood, bad commands) against one channel under load",
            description=chaos.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    _late_join_arguments(sub)
    _book_arguments(sub)
    overload_cli.add_arguments(sub)
    _delayed_arguments(sub)
    _abuse_arguments(sub)
    replay_time.add_arguments(sub)
    conflate.add_arguments(sub)
    _failover_arguments(sub)
    return parser


def _failover_arguments(sub: Any) -> None:
    failover = sub.add_parser("failover", help="kill an adapter mid-stream and check what the client got")
    failover.add_argument(
        "--backups", type=int, default=2, help="backups besides the active (default: %(default)s)"
    )
    failover.add_argument(
        "--rate", type=float, default=20_000, help="source messages/s (default: %(default)s)"
    )
    failover.add_argument(
        "--seconds", type=float, default=10, help="how long the source streams (default: %(default)s)"
    )
    failover.add_argument(
        "--kill",
        choices=("active", "backup", "worker", "none"),
        help="adapter to SIGKILL, or worker: a worker of the Spark cluster with its executors (--source "
        "spark --spark-master local-cluster) (default: active, or none when another fault is chosen)",
    )
    failover.add_argument("--kill-at", type=float, default=0.5, help="fraction of the run at which to kill")
    _network_arguments(failover.add_argument_group("hosts and network faults"))
    failover.add_argument("--symbols", type=int, default=200)
    failover.add_argument("--seed", type=int, default=7)
    failover.add_argument(
        "--source", choices=("plain", "spark"), default="plain", help="feed source (default: plain)"
    )
    failover.add_argument(
        "--spark-master",
        default="local[*]",
        help="with --source spark: local[N], spark://HOST:PORT, or local-cluster (a standalone master and "
        "two workers on this machine, the job submitted with spark-submit) (default: %(default)s)",
    )
    failover.add_argument("--heartbeat-timeout", type=float, help="adapters' heartbeat timeout in seconds")
    output_arguments(failover)


def _network_arguments(net: argparse._ActionsContainer) -> None:
    # Where the failover drill's processes run, and the faults of the network between them.
    net.add_argument(
        "--hosts",
        choices=("local", "netns"),
        default="local",
        help="local: processes on loopback; netns: one network namespace per host on a bridge (root)",
    )
    net.add_argument(
        "--transport",
        choices=("tcp", "epgm"),
        help="line transport (default: epgm with --hosts netns when pyzmq has OpenPGM, else tcp)",
    )
    net.add_argument("--cut", metavar="HOST", help="cut HOST's link at --kill-at (active, backup or N)")
    net.add_argument(
        "--partition", metavar="A,B", help="drop the sync bus between adapters A and B from --kill-at"
    )
    net.add_argument("--heal-at", type=float, default=0.8, help="fraction of the run at which to heal")
    net.add_argument("--loss", type=float, default=0.0, metavar="PCT", help="drop PCT%% of packets")
    net.add_argument(
        "--loss-on",
        choices=("active", "lines", "client"),
        default="active",
        help="whose outgoing packets --loss drops: the active's line, every line, or the client's",
    )
    net.add_argument("--restart", metavar="HOST", help="kill HOST's adapter at --kill-at and start it again")
    net.add_argument(
        "--journal",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="adapters journal their lines and serve replay; the client fills gaps from them (default: on)",
    )


def _book_arguments(sub: Any) -> None:
    from feedha.drills import book

    parser = sub.add_parser(
        "book",
        help="a captured fix44 or itch50 feed through the group, the active killed midway: the books",
        description=book.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--file", type=Path, required=True, help="the capture (docs/converters.md)")
    parser.add_argument("--format", choices=sorted(FORMATS), default=default_capture("book"))
    parser.add_argument("--rate", type=float, default=2000, help="playback messages/s (default: 2000)")
    parser.add_argument("--backups", type=int, default=2, help="backups besides the active (default: 2)")
    parser.add_argument("--book-depth", type=int, default=10, help="levels a side (default: 10)")
    parser.add_argument("--kill", choices=("active", "backup", "none"), default="active")
    parser.add_argument("--kill-at", type=float, default=0.5, help="fraction of the capture (default: 0.5)")
    output_arguments(parser)


def _run_book(args: argparse.Namespace) -> int:
    from feedha.drills import book

    if args.rate <= 0 or args.backups < 1 or not 0 < args.kill_at < 1 or args.book_depth < 1:
        print("feedha drill book: need --rate > 0, --backups >= 1, 0 < --kill-at < 1, --book-depth >= 1",
              file=sys.stderr)  # fmt: skip
        return 2
    options = book.BookDrillOptions(
        file=args.file, input_format=args.format, rate=args.rate, backups=args.backups,
        depth=args.book_depth, kill=args.kill, kill_at=args.kill_at,
    )  # fmt: skip
    result = run_logged(
        "book",
        args,
        lambda log: book.run_book(options, log),
        errors=(OSError, ValueError),
        text=_book_lines,
    )
    if result is None:
        return 1
    ok = result["lost"] == 0 and result["unaccounted"] == 0 and result["conflicts"] == 0
    return 0 if ok else 1


def _book_lines(result: dict[str, Any]) -> list[str]:
    keys = ("sent", "delivered", "lost", "unaccounted", "line_holes", "conflicts", "quarantined")
    return [*(f"{key:<12} {result[key]}" for key in keys), f"{'symbols':<12} {len(result['books'])}"]


def _late_join_arguments(sub: Any) -> None:
    from feedha.drills import late_join

    late = sub.add_parser(
        "late-join",
        help="clients join late from an image, across a failover and a session boundary",
        description=late_join.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    late.add_argument("--seconds", type=float, default=20, help="how long the source streams (default: 20)")
    late.add_argument("--rate", type=float, default=2000, help="source messages/s (default: 2000)")
    late.add_argument("--symbols", type=int, default=200)
    late.add_argument("--seed", type=int, default=7)
    late.add_argument(
        "--kill", choices=("active", "none"), default="active", help="SIGKILL the active midway"
    )
    late.add_argument("--kill-at", type=float, default=0.5, help="fraction of the run (default: 0.5)")
    late.add_argument(
        "--session-end-at", type=float, default=0.7, help="fraction of the run at which the session ends"
    )
    output_arguments(late)


def _run_late_join(args: argparse.Namespace) -> int:
    from feedha.drills import late_join

    return _run_checked(
        "late-join", args, late_join.options_from, late_join.run_late_join, late_join.summary_ok
    )


def _run_checked(
    name: str,
    args: argparse.Namespace,
    options_from: Callable[[argparse.Namespace], Any],
    run: Callable[[Any, IO[str]], dict[str, Any]],
    ok: Callable[[dict[str, Any]], bool],
) -> int:
    """A drill whose options come from ``options_from`` (a ValueError is a usage error: 2); 0 when ``ok``."""
    try:
        options = options_from(args)
    except ValueError as exc:
        print(f"feedha drill {name}: {exc}", file=sys.stderr)
        return 2
    result = run_logged(name, args, lambda log: run(options, log))
    return 0 if result is not None and ok(result) else 1


def _run_replay_time(args: argparse.Namespace) -> int:
    return _run_checked(
        "replay-time", args, replay_time.options_from, replay_time.run_replay_time, replay_time.summary_ok
    )


def _run_conflate(args: argparse.Namespace) -> int:
    return _run_checked("conflate", args, conflate.options_from, conflate.run_conflate, conflate.summary_ok)


def _delayed_arguments(sub: Any) -> None:
    parser = sub.add_parser(
        "delayed",
        help="the delayed stream under purges and a failover: nothing lost, repeated or early",
        description=delayed.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--delay", type=float, default=5.0, help="the delayed lines' delay, s (default: %(default)s)"
    )
    parser.add_argument(
        "--seconds", type=float, default=20.0, help="how long the source streams (default: %(default)s)"
    )
    parser.add_argument("--rate", type=float, default=2000.0, help="source messages/s (default: %(default)s)")
    parser.add_argument(
        "--backups", type=int, default=2, help="backups besides the active (default: %(default)s)"
    )
    parser.add_argument(
        "--purge", type=int, default=3, metavar="N", help="messages to purge (default: %(default)s)"
    )
    parser.add_argument("--kill", choices=("active", "backup", "none"), default="active")
    parser.add_argument("--kill-at", type=float, default=0.5, help="fraction of the run at which to kill")
    parser.add_argument("--seed", type=int, default=7)
    output_arguments(parser)


def _run_delayed(args: argparse.Namespace) -> int:
    return _run_checked(
        "delayed",
        args,
        delayed.options_from,
        delayed.run_delayed,
        lambda result: delayed.passed(result, purges=args.purge),
    )


def _abuse_arguments(sub: Any) -> None:
    from feedha.drills import abuse, abuse_cli

    abuse_cli.add_arguments(
        sub.add_parser(
            "abuse",
            help="quotas and limits under abuse: subscription and login floods, churn, idle connections, "
            "replay hoarding, while an honest subscriber must lose nothing",
            description=abuse.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )


def _run_abuse(args: argparse.Namespace) -> int:
    from feedha.drills import abuse, abuse_cli

    return _run_checked("abuse", args, abuse_cli.options_from, abuse.run_abuse, lambda r: r["passed"])


def _network_options(args: argparse.Namespace) -> dict[str, Any]:
    """The DrillOptions fields of the network faults, checked.

    Raises:
        ValueError: a combination that cannot run, named.
    """
    partition: tuple[str, str] | None = None
    if args.partition is not None:
        a, sep, b = args.partition.partition(",")
        if not sep or not a or not b or a == b:
            raise ValueError(f"--partition takes two adapters A,B, got {args.partition!r}")
        partition = (a, b)
    for name, value in (
        ("--cut", args.cut),
        ("--restart", args.restart),
        *(("--partition", p) for p in partition or ()),
    ):
        if value is not None and value not in ("active", "backup") and not value.isdigit():
            raise ValueError(f"{name} takes active, backup or an adapter number, got {value!r}")
    needs_netns = args.cut or partition or args.loss
    if needs_netns and args.hosts != "netns":
        raise ValueError("--cut, --partition and --loss need --hosts netns")
    if not 0 <= args.loss < 100 or not 0 < args.heal_at < 1 or args.heal_at <= args.kill_at:
        raise ValueError("need 0 <= --loss < 100 and --kill-at < --heal-at < 1")
    chosen = args.transport
    if chosen is None:
        chosen = "epgm" if args.hosts == "netns" and transport.has_multicast() else "tcp"
        if args.hosts == "netns" and chosen == "tcp":
            print("feedha drill: pyzmq has no OpenPGM; lines fall back to tcp://", file=sys.stderr)
    elif chosen == "epgm" and not transport.has_multicast():
        raise ValueError(
            "--transport epgm needs pyzmq built with OpenPGM (scripts/setup); use --transport tcp"
        )
    if args.kill == "worker" and (args.source != "spark" or args.spark_master != "local-cluster"):
        raise ValueError("--kill worker needs --source spark --spark-master local-cluster")
    other_fault = args.cut or partition or args.restart
    return {
        "kill": args.kill or ("none" if other_fault else "active"),
        "hosts": args.hosts,
        "transport": chosen,
        "cut": args.cut,
        "partition": partition,
        "heal_at": args.heal_at,
        "loss": args.loss,
        "loss_on": args.loss_on,
        "restart": args.restart,
        "journal": args.journal,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``feedha drill``."""
    args = build_parser().parse_args(argv)
    if args.drill == "late-join":
        return _run_late_join(args)
    if args.drill == "book":
        return _run_book(args)
    if args.drill == "overload":
        return overload_cli.main(args)
    if args.drill == "delayed":
        return _run_delayed(args)
    if args.drill == "abuse":
        return _run_abuse(args)
    if args.drill == "replay-time":
        return _run_replay_time(args)
    if args.drill == "conflate":
        return _run_conflate(args)
    if args.drill == "chaos":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        with tempfile.NamedTemporaryFile("w", prefix="feedha-chaos-", suffix=".log", delete=False) as log:
            try:
                return chaos.main(args, log)
            except (ProcessError, netns.NetnsError) as exc:
                print(f"feedha drill chaos: {exc} (component logs: {log.name})", file=sys.stderr)
                return 1
    if args.backups < 1 or args.rate <= 0 or args.seconds <= 0 or not 0 < args.kill_at < 1:
        print(
            "feedha drill: need --backups >= 1, --rate > 0, --seconds > 0, 0 < --kill-at < 1", file=sys.stderr
        )
        return 2
    try:
        network = _network_options(args)
    except ValueError as exc:
        print(f"feedha drill: {exc}", file=sys.stderr)
        return 2
    options = DrillOptions(
        **network,
        backups=args.backups,
        rate=args.rate,
        seconds=args.seconds,
        kill_at=args.kill_at,
        symbols=args.symbols,
        seed=args.seed,
        source=args.source,
        spark_master=args.spark_master,
        heartbeat_timeout=args.heartbeat_timeout,
    )
    result = run_logged("failover", args, lambda log: run_failover(options, log))
    asked_for_loss = options.loss > 0 or options.cut is not None  # the network drops on purpose
    ok = (
        result is not None
        and result["lost"] == 0
        and (result["unaccounted"] == 0 or asked_for_loss)
        and result["duplicates"] == 0
        and result["out_of_order"] == 0
        and result["conflicts"] == 0
        and result["line_holes"] == 0
    )
    return 0 if ok else 1
