#!/usr/bin/env python3
"""Check that no product code outside a format's folder and the registries names an input format.

Usage::

    python scripts/check_formats.py [ROOT]     # ROOT: the repository (default: this script's parent)

Exit status 0 when only a format's own folder (``adapter/formats/<folder>/``)
and the registries (:data:`REGISTRIES`: ``adapter/formats/registry.py``, and its light
twin of capture faces ``adapter/formats/capture_registry.py``) name it, and every entry
of :data:`ALLOWED` is still needed; 1 otherwise, with every problem listed.

Theory of operation
-------------------
The formats are the folders of ``adapter/formats/`` that hold a ``format.py``;
a format's name is its folder's with ``_`` as ``-`` (``feedha_fix`` is
``feedha-fix``). The files read are the ``.py`` files of the folders that
``[tool.feedha.namespace]`` in ROOT/pyproject.toml maps into the ``feedha``
namespace, but ``bench/`` (a benchmark of a format is about that format) and
never ``tests/``; each is parsed with :mod:`ast`, never imported. Outside
its folder and the registries, a file must not:

- hold a string literal that is a format's name (``"fix44"``; a docstring may
  name one: it explains, it does not choose). What to offer or run comes from
  the registries (``FORMATS``, ``DEFAULT_FORMAT``, ``format_named``; ``CAPTURES``,
  ``capture_named``, ``default_capture``: a command's default format is a property
  of that format's capture face);
- import a format-specific module: one of a format's folder, or any module
  one of whose dotted parts names a format (``feedha.adapter.formats.itch50.day``).

:data:`ALLOWED` lists the files that still do, each with the reason; an entry
that no longer offends is itself a problem (delete it), so the list only shrinks.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_layers import namespace, run_check  # noqa: E402 - a sibling script

FORMATS_FOLDER: Final = "adapter/formats"
REGISTRIES: Final = frozenset({"adapter/formats/registry.py", "adapter/formats/capture_registry.py"})
EXEMPT_FOLDERS: Final = frozenset({"bench"})
_WHY: Final = "ask the registry or move it into the format's folder (CONTRIBUTING.md, Input formats)"

# Files outside the formats' folders that still name a format, each with why.
ALLOWED: Final[Mapping[str, str]] = {
    "proto/registry.py": "the admin API's format of an adapter from before formats; proto imports no adapter",
}


def format_folders(root: Path) -> dict[str, str]:
    """Each format's folder name -> its name (``{"feedha_fix": "feedha-fix", ...}``)."""
    base = root / FORMATS_FOLDER
    if not base.is_dir():
        return {}
    return {path.parent.name: path.parent.name.replace("_", "-") for path in sorted(base.glob("*/format.py"))}


def _docstrings(tree: ast.AST) -> set[int]:
    # The ids of the constants that are docstrings (a module's, a class's, a function's).
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _imported(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        yield node.module
        yield from (f"{node.module}.{alias.name}" for alias in node.names)


def file_problems(rel: str, text: str, folders: Mapping[str, str]) -> list[str]:
    """The places in one file (``rel``, relative to the root) that name a format outside its folder."""
    names = set(folders.values())
    parts = (
        re.compile(r"(?:^|_)(" + "|".join(map(re.escape, sorted(folders))) + r")(?:_|$)") if folders else None
    )
    tree = ast.parse(text, filename=rel)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in names and id(node) not in docs:
                found.append(f"{rel}:{node.lineno}: names the format {node.value!r}; {_WHY}")
        for module in _imported(node):
            hits = [p for p in module.split(".") if parts is not None and parts.search(p)]
            if hits:
                found.append(f"{rel}:{node.lineno}: imports {module}, {hits[0]!r} is format-specific; {_WHY}")
                break
    return found


def _files(root: Path) -> Iterator[tuple[str, Path]]:
    for folder in namespace(root).values():
        if folder in EXEMPT_FOLDERS:
            continue
        for path in sorted((root / folder).rglob("*.py")):
            yield path.relative_to(root).as_posix(), path


def _line(problem: str) -> int:
    return int(problem.split(":")[1])


def check(root: Path, allowed: Mapping[str, str] = ALLOWED) -> list[str]:
    """Every problem in the tree at ``root``; empty when the formats keep to their folders."""
    folders = format_folders(root)
    found: list[str] = []
    offending: set[str] = set()
    for rel, path in _files(root):
        if rel in REGISTRIES or any(rel.startswith(f"{FORMATS_FOLDER}/{folder}/") for folder in folders):
            continue
        problems = sorted(file_problems(rel, path.read_text(encoding="utf-8"), folders), key=_line)
        if problems:
            offending.add(rel)
            if rel not in allowed:
                found += problems
    found += [
        f"{rel}: in ALLOWED of scripts/check_formats.py but names no format now: delete its entry"
        for rel in sorted(set(allowed) - offending)
    ]
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check; print the problems to stderr (0 when there are none, 1 otherwise)."""
    return run_check("check_formats", __doc__ or "", check, argv)


if __name__ == "__main__":
    sys.exit(main())
