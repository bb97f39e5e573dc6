"""Compile the project's modules to bytecode beside their sources (``make test`` and ``make demo`` run it).

Every process the tests and the demo start imports a few hundred of the
project's modules. Where ``PYTHONDONTWRITEBYTECODE`` is set (this machine's
shells set it) no process writes what it compiled, so each one compiled every
module again from source: an adapter took ~0.8 s to start instead of ~0.5,
on every start of every test. This writes the bytecode once; afterwards only
modules changed since are compiled (and then by each process again, until
this runs next).

The folders are the namespace's (``[tool.feedha.namespace]`` in
pyproject.toml) and the tests' helpers.
"""

from __future__ import annotations

import compileall
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def folders() -> list[Path]:
    """The folders whose modules are compiled: the namespace's packages, then ``tests``."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return [ROOT / folder for folder in pyproject["tool"]["feedha"]["namespace"].values()] + [ROOT / "tests"]


def main() -> int:
    ok = all(compileall.compile_dir(folder, quiet=1, workers=0) for folder in folders())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
