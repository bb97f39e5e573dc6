#!/usr/bin/env python3
"""Check that feedha's packages depend on each other only as the architecture says.

Usage::

    python scripts/check_layers.py [ROOT]     # ROOT: the repository (default: this script's parent)

Exit status 0 when the tree follows ``LAYER_RULES`` (scripts/layer_rules.py) and has no import
cycle, 1 otherwise, with every offender listed (file, line, what it imports and
which rule that breaks; every cycle with its files).

Theory of operation
-------------------
Each ``.py`` file of the source packages (the folders that
``[tool.feedha.namespace]`` in ROOT/pyproject.toml maps into the ``feedha``
namespace; not ``tests/``) is parsed with :mod:`ast`, never imported, so the
check needs nothing but Python and runs on a broken tree. A file's module is
its installed name (``client_lib/arbiter.py`` is ``feedha.client.arbiter``).
Every ``import``/``from ... import`` counts, at module level or inside a
function, with relative imports resolved.

- **Layer rules** look at the imported name and what it starts with:
  ``feedha.proto`` importing ``zmq.asyncio`` breaks its rule on ``zmq``.
  ``LAYER_EXCEPTIONS`` there names the few modules a package may still import
  though a rule forbids their package (exactly those modules, written as
  ``from <module> import ...`` or ``import <module>``).
- **The namespace**: importing a folder by its old top-level name (``import
  adapter``, ``from client_lib import X``) is refused: installed, only
  ``feedha`` exists. Imports under
  ``if TYPE_CHECKING:`` count too: a type-level dependency on a higher layer
  is still one.
- **Cycles** are found on the graph of files: ``from pkg import name`` leads
  to ``pkg/name.py`` when that file exists (or to ``pkg/name.pyi``, a C
  extension's stub: a file that imports nothing), else to ``pkg/__init__.py``;
  ``import pkg.mod`` leads to ``pkg/mod.py`` (the package ``__init__`` files
  it runs on the way are not edges, or every package that re-exports its own
  modules would be a cycle). Imports under ``if TYPE_CHECKING:`` are edges
  too: they do not run, but two modules that name each other's types cannot
  be read, tested or moved apart either. Each strongly connected component of
  more than one file (or a file importing itself) is reported with its files
  and one concrete loop through them, unless :data:`ALLOWED_CYCLES` lists it;
  an allowed cycle that is gone is reported too (delete its entry), so the
  list only shrinks.

Imports by string (``importlib.import_module``, ``python -m`` argv) are not
seen.
"""

from __future__ import annotations

import argparse
import ast
import sys
import tomllib
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parent))
from layer_rules import COMMANDS, LAYER_EXCEPTIONS, LAYER_RULES, SHARED  # noqa: E402 - a sibling script

NAMESPACE_ROOT: Final = "feedha"

# Cycles tolerated for now, each as the exact set of files of its component -> who removes it
# (type-only ones count: issue 60, item 7). None is left.
ALLOWED_CYCLES: Final[Mapping[frozenset[str], str]] = {}


def namespace(root: Path) -> dict[str, str]:
    """The installed package of each folder, from ``[tool.feedha.namespace]`` in root/pyproject.toml.

    Returns:
        ``{"feedha.client": "client_lib", ...}``: package name -> folder (relative to ``root``).
    """
    with open(root / "pyproject.toml", "rb") as f:
        table: dict[str, str] = tomllib.load(f)["tool"]["feedha"]["namespace"]
    return table


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


def parse_tree(root: Path, packages: Mapping[str, str] | None = None) -> list[SourceFile]:
    """Parse every ``.py`` file of the packages present under ``root`` (and list each C extension's stub).

    Args:
        root: the repository root.
        packages: package name -> its folder (default: :func:`namespace`).

    Returns:
        The files, sorted by path; each file's module is its installed (namespace) name.

    Raises:
        SyntaxError: a file does not parse.
    """
    files = []
    for package, folder in (namespace(root) if packages is None else packages).items():
        base = root / folder
        if not (base / "__init__.py").is_file():
            continue
        for path in sorted(base.rglob("*.py")):
            inner = path.relative_to(base)
            is_package = path.name == "__init__.py"
            parts = inner.parent.parts if is_package else (*inner.parent.parts, path.stem)
            module = ".".join([package, *parts])
            rel = path.relative_to(root)
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(rel))
            imports = tuple(sorted(_walk_imports(tree, module, is_package), key=lambda i: i.line))
            files.append(SourceFile(rel.as_posix(), module, is_package, imports))
        # A C extension (a stub with no .py beside it) is a module that imports nothing:
        # `from pkg import _native` leads to it, not to pkg/__init__.py.
        for path in sorted(base.rglob("*.pyi")):
            if not path.with_suffix(".py").exists():
                inner = path.relative_to(base)
                module = ".".join([package, *inner.parent.parts, path.stem])
                files.append(SourceFile(path.relative_to(root).as_posix(), module, False, ()))
    return sorted(files, key=lambda f: f.path)


def layer_violations(files: Sequence[SourceFile], folders: Mapping[str, str] | None = None) -> list[str]:
    """The imports that break :data:`LAYER_RULES` or bypass the namespace, one message each.

    Args:
        files: the parsed tree.
        folders: package name -> folder, to name imports of a folder's old
            top-level name (``import adapter`` instead of ``feedha.adapter``).
    """
    root_folder = (folders or {}).get(NAMESPACE_ROOT, NAMESPACE_ROOT)
    commands = {
        f.module
        for f in files
        if f.path.startswith(f"{root_folder}/") and f.module not in (NAMESPACE_ROOT, *SHARED)
    }
    bare = {folder: package for package, folder in (folders or {}).items() if folder != package}
    found = []
    for source in files:
        for imp in source.imports:
            top = imp.module.partition(".")[0]
            if top in bare:
                found.append(
                    f"{source.path}:{imp.line}: imports {imp.module}; import it as {bare[top]} "
                    "(everything installed lives in the feedha namespace)"
                )
        for key, (forbidden, why) in LAYER_RULES.items():
            if not _under(source.module, key):
                continue
            for imp in source.imports:
                if imp.module in LAYER_EXCEPTIONS.get(key, {}):
                    continue
                hit = _forbidden_hit(imp, forbidden, commands)
                if hit is not None:
                    guard = " (under TYPE_CHECKING)" if imp.type_checking else ""
                    where = f"{source.path}:{imp.line}: imports {imp.module}{guard}"
                    found.append(f"{where}; {key} must not import {hit} ({why})")
    return found


def _forbidden_hit(imp: Import, forbidden: frozenset[str], commands: set[str]) -> str | None:
    # `from feedha import transport` imports feedha.transport: judge each name it takes.
    modules = [f"{imp.module}.{n}" for n in imp.names] if imp.module == NAMESPACE_ROOT else [imp.module]
    for module in modules:
        if COMMANDS in forbidden and any(_under(module, c) for c in commands):
            return COMMANDS
        hit = next((name for name in sorted(forbidden) if _under(module, name)), None)
        if hit is not None:
            return hit
    return None


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def import_graph(files: Sequence[SourceFile]) -> dict[str, set[str]]:
    """File -> the files it imports, type-only included (see the module docstring for what is an edge)."""
    by_module = {f.module: f.path for f in files}
    graph: dict[str, set[str]] = {f.path: set() for f in files}
    for source in files:
        for imp in source.imports:
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
    files: Sequence[SourceFile], allowed: Collection[frozenset[str]] = ALLOWED_CYCLES.keys()
) -> list[str]:
    """The import cycles not in ``allowed``, and the ``allowed`` ones that are gone, one message each."""
    graph = import_graph(files)
    found = []
    seen = set()
    for component in _components(graph):
        if len(component) == 1 and component[0] not in graph[component[0]]:
            continue
        seen.add(frozenset(component))
        if frozenset(component) in allowed:
            continue
        loop = " -> ".join(_loop(graph, component))
        found.append(f"cycle between {len(component)} file(s): {', '.join(component)} (e.g. {loop})")
    for gone in sorted(sorted(c) for c in set(allowed) - seen):
        found.append(f"allowed cycle {', '.join(gone)} is gone: delete it from ALLOWED_CYCLES")
    return found


def check(root: Path, allowed: Collection[frozenset[str]] = ALLOWED_CYCLES.keys()) -> list[str]:
    """Every problem in the tree at ``root``; empty when it follows the layers.

    Args:
        root: the repository root.
        allowed: the cycles tolerated (each the set of its files).
    """
    folders = namespace(root)
    files = parse_tree(root, folders)
    # The tests are not installed, but they must import what is, by the same names.
    tests = parse_tree(root, {"tests": "tests"})
    return layer_violations([*files, *tests], folders) + import_cycles(files, allowed)


def run_check(name: str, doc: str, check: Callable[[Path], list[str]], argv: Sequence[str] | None) -> int:
    """The command line every check script shares: ``[ROOT]`` in, the problems on stderr.

    Args:
        name: the script's name, for its messages.
        doc: the script's module docstring (its first paragraph is ``--help``'s description).
        check: the problems of the tree at a root.
        argv: the arguments (``None``: ``sys.argv[1:]``).

    Returns:
        0 when there are none, 1 otherwise.
    """
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("root", nargs="?", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args(argv)
    problems = check(args.root)
    if problems:
        print(f"{name}: {len(problems)} problem(s):", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check; print the problems to stderr (0 when there are none, 1 otherwise)."""
    return run_check("check_layers", __doc__ or "", check, argv)


if __name__ == "__main__":
    sys.exit(main())
