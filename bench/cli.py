"""``feedha bench NAME|all [--json] [--quick]``: run benchmarks, print one figure per line."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from typing import Final

from bench.common import Figure, format_figure

# name -> (module, function); the function takes ``quick: bool`` and returns a list of figures.
BENCHMARKS: Final[dict[str, tuple[str, str]]] = {
    "journal": ("bench.journal", "run"),
}


def main(argv: list[str]) -> int:
    """Run the named benchmark (or all) and print its figures.

    Args:
        argv: arguments after ``feedha bench``.

    Returns:
        The exit code.
    """
    parser = argparse.ArgumentParser(prog="feedha bench", description=__doc__)
    parser.add_argument("name", choices=[*BENCHMARKS, "all"], help="benchmark to run")
    parser.add_argument("--json", action="store_true", help="one JSON object per figure")
    parser.add_argument("--quick", action="store_true", help="smaller runs (a smoke test)")
    args = parser.parse_args(argv)
    names = list(BENCHMARKS) if args.name == "all" else [args.name]
    for name in names:
        module_name, function_name = BENCHMARKS[name]
        run: Callable[..., list[Figure]] = getattr(importlib.import_module(module_name), function_name)
        for item in run(quick=args.quick):
            print(format_figure(item, as_json=args.json), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
