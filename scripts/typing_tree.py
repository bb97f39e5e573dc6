#!/usr/bin/env python3
"""Lay the feedha namespace out as it is installed, for mypy.

Usage::

    python scripts/typing_tree.py [OUT]     # OUT: default .typing/ under the repository

The repository keeps one folder per package (``adapter/``, ``client_lib/`` ...)
and the build maps them into the ``feedha`` namespace
(``[tool.feedha.namespace]`` in pyproject.toml). At run time the editable
install's import hook does that mapping; mypy resolves imports on the file
system and knows no such hook, so this script builds ``OUT/feedha/``: a
symbolic link for every entry of the namespace root's folder and one per
mapped package folder, under its installed name. ``mypy -p feedha`` with
``mypy_path = OUT`` then checks the real files by the names users import.
Links, not copies: editing a file needs no new tree; adding a package
folder does (scripts/check builds it afresh every run).
"""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
NAMESPACE_ROOT: Final = "feedha"


def build(out: Path, root: Path = ROOT) -> Path:
    """Make ``out/feedha`` anew; returns it."""
    with open(root / "pyproject.toml", "rb") as f:
        table: dict[str, str] = tomllib.load(f)["tool"]["feedha"]["namespace"]
    tree = out / NAMESPACE_ROOT
    if tree.exists() or tree.is_symlink():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    for entry in (root / table[NAMESPACE_ROOT]).iterdir():
        if entry.name != "__pycache__":
            (tree / entry.name).symlink_to(entry.resolve())
    for package, folder in table.items():
        if package == NAMESPACE_ROOT:
            continue
        parent, _, name = package.rpartition(".")
        if parent != NAMESPACE_ROOT:
            raise SystemExit(f"typing_tree: {package}: only feedha.<name> packages are mapped")
        (tree / name).symlink_to((root / folder).resolve(), target_is_directory=True)
    return tree


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else ROOT / ".typing"
    print(build(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
