"""The ``feedha`` command: runs components, the demo, drills, benchmarks and journal tools.

Each sub-command lives in its own module with a ``main(argv) -> int``; this
module only dispatches, importing the target lazily so ``feedha --help`` stays
fast and a component never imports what it does not use (Spark, gRPC, ...).
A command that needs an optional part of feedha (an *extra*, see
``feedha.extras``) that is not installed says which one, and exits 2.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Final

from feedha import extras

# name -> (module, function, one-line help)
COMMANDS: Final[dict[str, tuple[str, str, str]]] = {
    "demo": ("feedha.demo", "main", "run the whole cluster on this machine, then a live failover drill"),
    "drill": ("feedha.drills.cli", "main", "drills: failover (kill, cut, partition, loss) and chaos"),
    "adapter": ("feedha.adapter.__main__", "main", "run one feed adapter"),
    "source": ("feedha.plain_source.cli", "main", "run the plain-Python test source (deterministic, seeded)"),
    "feed": ("feedha.spark_feed.job", "main", "run the PySpark Structured Streaming feed source"),
    "admin-server": (
        "feedha.admin_server.server",
        "main",
        "run the stream administration server (and manage keys)",
    ),
    "subscribe": ("feedha.client.console", "main", "console subscriber: print what a channel delivers"),
    "replay": ("feedha.client.replay_console", "main", "replay a window of a channel by time, at a speed"),
    "journal": ("feedha.adapter.journal.cli", "main", "journal tools: dump, verify"),
    "bench": ("feedha.bench.cli", "main", "benchmarks, each beside the raw-ZeroMQ ceiling (prints JSON)"),
    "keys": ("feedha.keys", "main", "CURVE key pairs for adapters' lines and sync buses"),
    "up": ("feedha.up", "main", "run a secure local cluster in the foreground until Ctrl-C"),
}

# name -> the extras (pyproject.toml [project.optional-dependencies]) it needs
# beyond the base install; a command not listed runs on the base install.
EXTRAS: Final[dict[str, tuple[str, ...]]] = {
    "demo": ("adapter", "admin"),
    "drill": ("adapter", "admin"),
    "adapter": ("adapter",),
    "feed": ("spark",),
    "admin-server": ("admin",),
    "journal": ("adapter",),
    "bench": ("bench",),
    "keys": ("adapter",),
    "up": ("adapter", "admin"),
}


def _usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: feedha [--version] COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_m, _f, text) in COMMANDS.items()]
    lines += ["", "Run `feedha COMMAND --help` for the options of one command."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch ``feedha COMMAND ARGS`` to the command's module.

    Args:
        argv: arguments without the program name; defaults to ``sys.argv[1:]``.

    Returns:
        The process exit code.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        print(f"feedha {extras.version()}")
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"feedha: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    needed = EXTRAS.get(name, ())
    message = extras.missing_message(f"feedha {name}", needed)
    if message is not None:
        print(f"feedha: {message}", file=sys.stderr)
        return 2
    module_name, function_name, _help = COMMANDS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # The metadata said everything is there, yet an import failed (a
        # package removed by hand, a broken environment): still no traceback.
        if (exc.name or "").partition(".")[0] == "feedha":
            raise
        hint = extras.install_hint(needed or ("all",))
        print(f"feedha {name}: cannot import {exc.name!r}; install it with: {hint}", file=sys.stderr)
        return 2
    function: Callable[[list[str]], int] = getattr(module, function_name)
    return function(rest)


if __name__ == "__main__":
    sys.exit(main())
