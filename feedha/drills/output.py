"""How a drill command runs: its components' logs in a file, its result printed as JSON or as text."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from feedha import netns
from feedha.procs import ProcessError


def output_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--json`` and ``--log``, the options :func:`run_logged` reads, to a drill's ``parser``."""
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.add_argument("--log", type=Path, help="file for the components' logs (default: a temp file)")


def run_logged(
    name: str,
    args: Any,
    run: Callable[[IO[str]], dict[str, Any]],
    *,
    errors: tuple[type[BaseException], ...] = (),
    text: Callable[[dict[str, Any]], Iterable[str]] | None = None,
) -> dict[str, Any] | None:
    """Run a drill with its components' logs in ``args.log`` (or a temp file) and print its result.

    Args:
        name: the drill's name, as ``feedha drill NAME`` says it.
        args: the parsed command line (``log`` and ``json`` are read).
        run: runs the drill, its components logging to the file it is given.
        errors: failures beside a component's own (ProcessError, NetnsError) that end the
            drill with a message on stderr instead of a traceback.
        text: the lines printed without ``--json`` (default: every key and its value).

    Returns:
        The result, with ``log`` added; ``None`` when the drill failed (said on stderr).
    """
    log_path = args.log or Path(tempfile.mkstemp(prefix=f"feedha-drill-{name}-", suffix=".log")[1])
    # SIGTERM must unwind through the drill's finally: it stops the processes, removes the namespaces.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    caught: tuple[type[BaseException], ...] = (ProcessError, netns.NetnsError, *errors)
    with open(log_path, "w") as log:
        try:
            result = run(log)
        except caught as exc:
            print(f"feedha drill {name}: {exc} (component logs: {log_path})", file=sys.stderr)
            return None
    result["log"] = str(log_path)
    if args.json:
        print(json.dumps(result))
    else:
        width = max(len(k) for k in result)
        lines = text(result) if text is not None else (f"{k:<{width}}  {v}" for k, v in result.items())
        for line in lines:
            print(line)
    return result
