#!/usr/bin/env python3
"""Check that feedha's packages depend on each other only as the architecture says.

Usage::

    python scripts/check_layers.py [ROOT]     # ROOT: the repository (default: this script's parent)

Exit status 0 when the tree follows :data:`LAYER_RULES` and has no import
cycle, 1 otherwise, with every offender listed (file, line, what it imports and
which rule that breaks; every cycle with its files).

Theory of operation
-------------------
Each ``.py`` file of the source packages (:data:`SOURCE_PACKAGES`, those
present under ROOT; not ``tests/``) is parsed with :mod:`ast`, never
imported, so the check needs nothing but Python and runs on a broken tree.
Every ``import``/``from ... import`` counts, at module level or inside a
function, with relative imports resolved.

- **Layer rules** look at the first component of the imported name: ``proto``
  importing ``zmq.asyncio`` breaks the ``proto`` rule on ``zmq``. Imports under
  ``if TYPE_CHECKING:`` count too: a type-level dependency on a higher layer
  is still one.
- **Cycles** are found on the graph of files: ``from pkg import name`` leads
  to ``pkg/name.py`` when that file exists, else to ``pkg/__init__.py``;
  ``import pkg.mod`` leads to ``pkg/mod.py`` (the package ``__init__`` files
  it runs on the way are not edges, or every package that re-exports its own
  modules would be a cycle). Imports under ``if TYPE_CHECKING:`` are not
  edges: they do not run. Each strongly connected component of more than one
  file (or a file importing itself) is reported with its files and one
  concrete loop through them.

Imports by string (``importlib.import_module``, ``python -m`` argv) are not
seen.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

# What a module that decides must not touch: sockets, clocks, threads, RPC.
_IO: Final = frozenset(
    {
        "zmq",
        "grpc",
        "asyncio",
        "time",
        "threading",
        "socket",
        "select",
        "psutil",
        "pyspark",
        "transport",
        "admin_client",
    }
)
_PURE: Final = "a pure core decides from its inputs and the time passed in; its shell does the I/O"

# The layers, lowest first. package (or module prefix) -> (names it must not
# import, why). A name forbids itself and everything under it (``zmq`` forbids
# ``zmq.asyncio``); every rule whose key prefixes a module applies to it.
# A package not listed may import anything that does not make a cycle.
LAYER_RULES: Final[Mapping[str, tuple[frozenset[str], str]]] = {
    "proto": (
        frozenset(
            {"zmq", "adapter", "admin_server", "admin_client", "client_lib", "transport", "feedha", "bench"}
        ),
        "proto is pure contracts and codecs: every other package depends on it, never the reverse",
    ),
    "transport": (
        frozenset({"adapter", "admin_server", "admin_client", "client_lib"}),
        "transport is ZeroMQ set-up shared by adapters, sources and subscribers",
    ),
    "admin_client": (
        frozenset({"adapter", "admin_server", "client_lib"}),
        "admin_client is the admin API's client side, shared by the adapter, client_lib and feedctl",
    ),
    "adapter": (
        frozenset({"admin_server"}),
        "the adapter reaches the admin server through admin_client and proto.registry only",
    ),
    "client_lib": (
        frozenset({"adapter", "admin_server"}),
        "what subscribers import must not pull in the adapter or the server",
    ),
    # The pure cores (STYLE.md §1): they decide, the shells around them do the I/O.
    "adapter.core": (
        _IO | {"adapter.runner", "adapter.persistence", "adapter.admin_link", "adapter.journal"},
        _PURE,
    ),
    "adapter.conversion": (_IO | {"adapter.core", "adapter.runner", "adapter.journal"}, _PURE),
    "client_lib.arbiter": (_IO, _PURE),
    "plain_source.model": (_IO, _PURE),
    "plain_source.frames": (_IO, _PURE),
    "plain_source.pacing": (_IO, _PURE),
}

SOURCE_PACKAGES: Final = (
    "proto",
    "transport",
    "admin_client",
    "adapter",
    "admin_server",
    "client_lib",
    "spark_feed",
    "plain_source",
    "feedha",
    "bench",
)

# Cycles tolerated for now, each as the exact set of files of its component,
# with a comment saying who removes it and when. None today: adapter/state.py
# imports adapter/conversion.py only under TYPE_CHECKING, which is no cycle.
ALLOWED_CYCLES: Final[frozenset[frozenset[str]]] = frozenset()


@dataclass(frozen=True, slots=True)
class Import:
    """One imported name, as written and resolved.

    Attributes:
        module: the absolute dotted module name (``from a import b`` gives ``a``).
        names: the names after ``from ... import`` (empty for ``import a.b``).
        line: 1-based line number.
        type_checking: under ``if TYPE_CHECKING:`` (does not run).
    """

    module: str
    names: tuple[str, ...]
    line: int
    type_checking: bool


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A parsed file of a source package."""

    path: str  # relative to the root, with "/"
    module: str  # dotted name; a package's __init__ is the package's name
    is_package: bool
    imports: tuple[Import, ...]


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _resolve(module: str | None, level: int, here: str, is_package: bool) -> str:
    # The absolute name of `from <level dots><module> import ...` written in module `here`:
    # one dot is here's package (here itself for a package's __init__), each more dot one up.
    if level == 0:
        return module or ""
    parts = here.split(".")
    package = parts if is_package else parts[:-1]
    base = package[: len(package) - (level - 1)] if level > 1 else package
    return ".".join([*base, module] if module else base)


def _walk_imports(tree: ast.AST, here: str, is_package: bool) -> Iterator[Import]:
    # Strategy: an explicit stack instead of ast.walk, to know whether a node
    # sits in the body of an `if TYPE_CHECKING:`.
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, guarded = stack.pop()
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(alias.name, (), node.lineno, guarded)
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(node.module, node.level, here, is_package)
            yield Import(module, tuple(a.name for a in node.names), node.lineno, guarded)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend((child, True) for child in node.body)
            stack.extend((child, guarded) for child in node.orelse)
            continue
        stack.extend((child, guarded) for child in ast.iter_child_nodes(node))


def parse_tree(root: Path, packages: Sequence[str] = SOURCE_PACKAGES) -> list[SourceFile]:
    """Parse every ``.py`` file of the packages present under ``root``.

    Args:
        root: the repository root.
        packages: the top-level package names to look for.

    Returns:
        The files, sorted by path.

    Raises:
        SyntaxError: a file does not parse.
    """
    files = []
    for package in packages:
        if not (root / package / "__init__.py").is_file():
            continue
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            is_package = path.name == "__init__.py"
            parts = rel.parent.parts if is_package else (*rel.parent.parts, path.stem)
            module = ".".join(parts)
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(rel))
            imports = tuple(sorted(_walk_imports(tree, module, is_package), key=lambda i: i.line))
            files.append(SourceFile(rel.as_posix(), module, is_package, imports))
    return files


def layer_violations(files: Sequence[SourceFile]) -> list[str]:
    """The imports that break :data:`LAYER_RULES`, one message each."""
    found = []
    for source in files:
        for key, (forbidden, why) in LAYER_RULES.items():
            if not _under(source.module, key):
                continue
            for imp in source.imports:
                hit = next((name for name in sorted(forbidden) if _under(imp.module, name)), None)
                if hit is not None:
                    guard = " (under TYPE_CHECKING)" if imp.type_checking else ""
                    where = f"{source.path}:{imp.line}: imports {imp.module}{guard}"
                    found.append(f"{where}; {key} must not import {hit} ({why})")
    return found


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def import_graph(files: Sequence[SourceFile]) -> dict[str, set[str]]:
    """File -> the files it imports at run time (see the module docstring for what is an edge)."""
    by_module = {f.module: f.path for f in files}
    graph: dict[str, set[str]] = {f.path: set() for f in files}
    for source in files:
        for imp in source.imports:
            if imp.type_checking:
                continue
            targets = [by_module.get(f"{imp.module}.{name}") for name in imp.names]
            if not imp.names or None in targets:
                targets.append(by_module.get(imp.module))
            graph[source.path].update(t for t in targets if t is not None)
    return graph


def _components(graph: Mapping[str, set[str]]) -> list[list[str]]:
    # Tarjan's strongly connected components, iterative (no recursion limit on deep chains).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    result: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                result.append(sorted(component))
    return result


def _loop(graph: Mapping[str, set[str]], component: Sequence[str]) -> list[str]:
    # One concrete loop through the component's first file (breadth-first, so the shortest).
    members = set(component)
    start = component[0]
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in parent:
                    parent[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no loop in component {component}")  # a component always has one


def import_cycles(
    files: Sequence[SourceFile], allowed: frozenset[frozenset[str]] = ALLOWED_CYCLES
) -> list[str]:
    """The import cycles not in ``allowed``, one message each."""
    graph = import_graph(files)
    found = []
    for component in _components(graph):
        if len(component) == 1 and component[0] not in graph[component[0]]:
            continue
        if frozenset(component) in allowed:
            continue
        loop = " -> ".join(_loop(graph, component))
        found.append(f"cycle between {len(component)} file(s): {', '.join(component)} (e.g. {loop})")
    return found


def check(root: Path) -> list[str]:
    """Every problem in the tree at ``root``; empty when it follows the layers."""
    files = parse_tree(root)
    return layer_violations(files) + import_cycles(files)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check; print the problems to stderr.

    Returns:
        0 when there are none, 1 otherwise.
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args(argv)
    problems = check(args.root)
    if problems:
        print(f"check_layers: {len(problems)} problem(s):", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
