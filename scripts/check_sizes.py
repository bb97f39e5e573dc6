#!/usr/bin/env python3
"""Check that feedha's Python stays within the sizes CONTRIBUTING.md sets ("Size").

Usage::

    python scripts/check_sizes.py [ROOT]     # ROOT: the repository (default: this script's parent)

Exit status 0 when every module has at most :data:`MODULE_LINES` lines and
every function at most :data:`FUNCTION_LINES`, or is in :data:`ALLOWED`, and
every entry of :data:`ALLOWED` is still an offender; 1 otherwise, with every
problem listed (file, line, its size and the limit).

Theory of operation
-------------------
The files read are the ``.py`` files of the folders that
``[tool.feedha.namespace]`` in ROOT/pyproject.toml maps into the ``feedha``
namespace (the product's packages and ``bench/``) and of ``scripts/``; not
``tests/``, not generated code (:func:`is_generated`: the protobuf modules and
what ``scripts/gen_sync_client.py`` writes; the generated constants are C
headers, not read).

- A **module**'s size is its number of lines, blank lines, comments and
  docstrings included.
- A **function** (a method, a nested function) runs from its ``def`` line to
  its last line, decorators aside; a nested function counts inside its parent
  too. It is named by its qualified name in its file
  (``adapter/core/machine.py:AdapterCore.__init__``).

:data:`ALLOWED` lists the offenders that were there when the limits were set
(issue 60), each with who removes it. An entry whose module or function is no
longer over its limit (split, or gone) is itself a problem: delete it in the
same change, so the list only shrinks. Files are parsed with :mod:`ast`, never
imported. Import cycles, type-only imports included, are
``scripts/check_layers.py``'s (its ``ALLOWED_CYCLES``).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_layers import namespace, run_check  # noqa: E402 - a sibling script

MODULE_LINES: Final = 500
FUNCTION_LINES: Final = 60

# Written by scripts/gen_sync_client.py (its TARGET); the *_pb2*.py files by gen_proto.py.
GENERATED: Final = frozenset({"client_lib/_sync_feed_api.py"})
EXTRA_FOLDERS: Final = ("scripts",)

# The offenders of the day the limits were set, each with who removes it (issue 60's helpers:
# F formats, item 1; A the state owners, item 3; P the pump, item 2; D the drills and checks,
# items 4 and 7). "path" is a module, "path:qualified.name" a function in it.
_F: Final = "F (issue 60 item 1: formats)"
_A: Final = "A (issue 60 item 3: one owner per state)"
_P: Final = "P (issue 60 item 2: the hot path once)"
_D: Final = "D (issue 60 item 7: sizes)"
ALLOWED: Final[Mapping[str, str]] = {
    "plain_source/model.py:SymbolModel._decide": _D,
}


@dataclass(frozen=True, slots=True)
class Size:
    """One module or function and its lines."""

    name: str  # "path" or "path:qualified.name", the key of ALLOWED
    line: int  # where it starts (1 for a module)
    lines: int
    limit: int

    @property
    def path(self) -> str:
        """The file, relative to the root."""
        return self.name.partition(":")[0]

    @property
    def over(self) -> bool:
        """Whether it is over its limit."""
        return self.lines > self.limit


def is_generated(path: str) -> bool:
    """Whether the file at ``path`` (relative, "/"-separated) is generated code, outside the limits."""
    stem = path.rpartition("/")[2].removesuffix(".py")
    return path in GENERATED or stem.endswith(("_pb2", "_pb2_grpc"))


def python_files(root: Path) -> list[str]:
    """The files the limits apply to, relative to ``root``, sorted."""
    folders = sorted({*namespace(root).values(), *EXTRA_FOLDERS})
    found = []
    for folder in folders:
        for path in (root / folder).rglob("*.py"):
            rel = path.relative_to(root).as_posix()
            if not is_generated(rel) and "__pycache__" not in rel:
                found.append(rel)
    return sorted(found)


def _functions(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    # Every function under node, by its qualified name (a class or a function is a scope).
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + child.name, child
            yield from _functions(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}{child.name}.")
        else:
            yield from _functions(child, prefix)


def sizes(root: Path, path: str) -> Iterator[Size]:
    """The module at ``path`` (relative to ``root``) and each of its functions, with their lines.

    Raises:
        SyntaxError: the file does not parse.
    """
    text = (root / path).read_text(encoding="utf-8")
    yield Size(path, 1, len(text.splitlines()), MODULE_LINES)
    for name, node in _functions(ast.parse(text, filename=path), ""):
        end = node.end_lineno if node.end_lineno is not None else node.lineno
        yield Size(f"{path}:{name}", node.lineno, end - node.lineno + 1, FUNCTION_LINES)


def check(root: Path, allowed: Mapping[str, str] = ALLOWED) -> list[str]:
    """Every problem in the tree at ``root``: an offender not allowed, an allowed entry that is not one.

    Args:
        root: the repository root.
        allowed: the tolerated offenders (name -> who removes it).
    """
    problems = []
    offenders = set()
    for path in python_files(root):
        for size in sizes(root, path):
            if not size.over:
                continue
            offenders.add(size.name)
            if size.name not in allowed:
                what = "module" if size.name == path else f"function {size.name.partition(':')[2]}"
                problems.append(
                    f"{path}:{size.line}: {what} has {size.lines} lines, over the limit of {size.limit} "
                    "(CONTRIBUTING.md, Size: split it where it has a seam)"
                )
    for name in sorted(set(allowed) - offenders):
        problems.append(
            f"{name} is within its limit now (or gone): delete it from ALLOWED in scripts/check_sizes.py"
        )
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check; print the problems to stderr (0 when there are none, 1 otherwise)."""
    return run_check("check_sizes", __doc__ or "", check, argv)


if __name__ == "__main__":
    sys.exit(main())
