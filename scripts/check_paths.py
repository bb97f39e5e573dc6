#!/usr/bin/env python3
"""Check that every repository path and module the prose names exists.

Usage::

    python scripts/check_paths.py [ROOT]     # ROOT: the repository (default: this script's parent)

Exit status 0 when every reference resolves, 1 otherwise, with each missing
one listed (file, line, the reference as written).

Theory of operation
-------------------
Where it looks: every Markdown file of the tree, whole (README.md,
CONTRIBUTING.md, docs/*.md, deploy/spark/README.md); the docstrings and
comments of every ``.py``/``.pyi`` file; the comments of the C sources and
the ``.proto`` files. It
reads them as text and imports nothing. In a git checkout the files are the
ones git tracks plus the untracked ones it does not ignore; elsewhere every
file below ROOT outside hidden folders.

What counts as a reference:

- **A path** whose first part is a top-level entry of the repository
  (``adapter/core/gate.py``, ``docs/wire-format.md``, ``scripts/check``,
  ``tests/unit/``) or an installed package (``feedha/adapter/core/gate.py`` is
  ``adapter/core/gate.py`` by ``[tool.feedha.namespace]`` in pyproject.toml).
  A pytest node id or a line number after it (``tests/unit/test_paths.py::test_the_repository_passes``,
  ``setup.py:12``) is cut off. A path that goes on into a wildcard or a
  placeholder (``proto/*_pb2.py``, ``tests/unit/<pkg>/``) counts up to there
  only when it ends at a ``/``, and is skipped otherwise.
- **A module**: a dotted name that starts with ``feedha.`` anywhere
  (``feedha.adapter.core.gate``), or, inside code markup (backticks, so also
  ``:mod:`...``` roles), with a mapped folder's name (``adapter.core.gate``,
  ``client_lib.arbiter``). Its longest prefix that is a module (a ``.py``
  file, a package, or a C extension with its ``.pyi`` or ``.c``) must exist,
  and the part after it, if any, must start with a name that module defines
  or imports at its top level (``feedha.proto.fix.encode_market_data``).
  ``feedha.v1`` and the like are protobuf packages, not modules: skipped.
- **A Markdown file name** on its own (``CONTRIBUTING.md``) must be in the
  root, in ``docs/`` or beside the file that names it.
- **A Markdown link target** (``[text](wire-format.md#section)``) must exist
  relative to the file that holds the link.

Not references: absolute paths, URLs, paths under folders the repository
does not have (``results/``, ``.venv/``), and the files programs write
(:data:`WRITTEN`).
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_layers import NAMESPACE_ROOT, namespace  # noqa: E402 - a sibling script

# A path: parts joined by "/", not inside a longer path, a URL or a word.
_PATH: Final = re.compile(r"(?<![\w./~:@-])((?:[\w.-]+/)+[\w.-]*)")
_AFTER_PATH_SKIP: Final = frozenset("*<{$[")  # a wildcard or a placeholder follows
_NODE_ID: Final = re.compile(r"(::|:\d).*$")
_MODULE: Final = re.compile(r"(?<![\w./-])(feedha(?:\.[A-Za-z_]\w*)+)(?![\w/-])")
_CODE_SPAN: Final = re.compile(r"`+([^`\n]+?)`+")
_DOTTED: Final = re.compile(r"~?([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(\))?")
_MARKDOWN_NAME: Final = re.compile(r"(?<![\w./-])([\w-]+\.md)\b")
_LINK: Final = re.compile(r"\]\(([^)\s]+)\)")
_PYTHON_LEXEME: Final = re.compile(
    r"""[rRbBuUfF]{0,2}(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')|#[^\n]*"""
)
_C_COMMENT: Final = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_PROTO_PACKAGE: Final = re.compile(r"v\d+$")
_GENERATED: Final = re.compile(r"_pb2(_grpc)?\.pyi?$")
# A dotted name in code markup that ends in one of these is a file name, not a module.
_FILE_SUFFIXES: Final = frozenset(
    "py pyi md c h so toml yaml yml json txt csv proto sh html js css png cfg ini".split()
)
# Files a program writes (named in the prose, never in the tree).
WRITTEN: Final = frozenset({"REPORT.md"})  # bench/report.py, into the results folder


@dataclass(frozen=True, slots=True)
class Missing:
    """A reference that does not resolve."""

    path: str  # the file that holds it, relative to the root
    line: int
    reference: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reference} {self.why}"


@dataclass(frozen=True, slots=True)
class _Text:
    # A stretch of prose and the line it starts on.
    line: int
    text: str


def listed_files(root: Path) -> list[str]:
    """Every file of the tree at ``root``, relative to it (git's view in a checkout)."""
    if (root / ".git").exists():
        try:
            return subprocess.run(
                ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                cwd=root,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.splitlines()
        except (OSError, subprocess.CalledProcessError):
            pass  # no git: read the folder
    return [
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    ]


def source_files(root: Path, listed: Iterable[str] | None = None) -> list[str]:
    """The files to read under ``root`` (Markdown, Python, C, protobuf), relative to it, sorted."""
    suffixes = (".md", ".py", ".pyi", ".c", ".h", ".proto")
    return sorted(
        name
        for name in (listed_files(root) if listed is None else listed)
        if name.endswith(suffixes) and not _GENERATED.search(name) and (root / name).is_file()
    )


def _python_texts(source: str) -> Iterator[_Text]:
    # Docstrings (triple-quoted strings that stand alone on their lines, as a
    # statement does) and comments. Strategy: one regular expression that
    # reads string literals whole, so a "#" inside one is not a comment; ast
    # and tokenize would be exact but take seconds over the whole tree.
    for match in _PYTHON_LEXEME.finditer(source):
        lexeme = match.group()
        line = source.count("\n", 0, match.start()) + 1
        if lexeme.startswith("#"):
            yield _Text(line, lexeme)
            continue
        if not lexeme.lstrip("rRbBuUfF").startswith(('"""', "'''")):
            continue
        before = source[source.rfind("\n", 0, match.start()) + 1 : match.start()]
        after_end = source.find("\n", match.end())
        after = source[match.end() : len(source) if after_end < 0 else after_end]
        if not before.strip() and (not after.strip() or after.strip().startswith("#")):
            yield _Text(line, lexeme)


def _texts(name: str, source: str) -> Iterator[_Text]:
    if name.endswith(".md"):
        yield _Text(1, source)
    elif name.endswith((".py", ".pyi")):
        yield from _python_texts(source)
    else:
        for match in _C_COMMENT.finditer(source):
            yield _Text(source.count("\n", 0, match.start()) + 1, match.group())


class Tree:
    """The repository as the references see it: files, folders and the namespace.

    Args:
        root: the repository root.
        files: its files, relative to it (``source_files(root)`` by default).
    """

    def __init__(self, root: Path, files: Iterable[str] | None = None) -> None:
        self.root = root
        self.packages = namespace(root)
        listed = listed_files(root)
        self.files = set(source_files(root, listed) if files is None else files)
        # What exists: the listed files and their folders (a build's leftovers do not count).
        self.known = set(listed)
        for name in listed:
            parts = name.split("/")
            self.known.update("/".join(parts[:end]) for end in range(1, len(parts)))
        # A path is checked when it starts at one of these (not at results/ or .venv/).
        self.top = {name.partition("/")[0] for name in listed} | {NAMESPACE_ROOT}
        # Folder names a module reference in code markup may start with (adapter, client_lib ...).
        self.folders = set(self.packages.values())

    def exists(self, path: str) -> bool:
        """Whether ``path`` (relative, "/"-separated) is a file or folder, as written or as installed."""
        return any(self.has(candidate) for candidate in self._candidates(path))

    def has(self, path: str) -> bool:
        """Whether ``path`` (relative, "/"-separated, no ``..``) is a file or folder of the tree."""
        return path.strip("/") in self.known

    def _candidates(self, path: str) -> Iterator[str]:
        yield path
        parts = path.split("/")
        # feedha/adapter/journal/writer.py is adapter/journal/writer.py: the longest mapped package wins.
        for length in range(len(parts), 0, -1):
            folder = self.packages.get(".".join(parts[:length]))
            if folder is not None:
                yield "/".join([folder, *parts[length:]])
                return

    def module_file(self, dotted: str) -> str | None:
        """The file of the module ``dotted`` (installed name, or a folder's name), or ``None``."""
        parts = dotted.split(".")
        base = None
        for length in range(len(parts), 0, -1):
            folder = self.packages.get(".".join(parts[:length]))
            if folder is not None:
                base = [folder, *parts[length:]]
                break
        if base is None:
            base = parts
        stem = "/".join(base)
        for candidate in (f"{stem}.py", f"{stem}/__init__.py", f"{stem}.pyi", f"{stem}.c"):
            if self.has(candidate):
                return candidate
        return None


@cache
def _top_level_names(path: Path) -> frozenset[str]:
    # What a module defines or imports at its top level (inside if/try blocks too).
    names: set[str] = set()
    stack: list[ast.stmt] = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).partition(".")[0] for a in node.names)
        elif isinstance(node, ast.If | ast.Try | ast.With):
            for block in ("body", "orelse", "finalbody", "handlers"):
                stack.extend(getattr(node, block, []))
        elif isinstance(node, ast.ExceptHandler):
            stack.extend(node.body)
    return frozenset(names)


def _check_module(tree: Tree, dotted: str) -> str | None:
    # Why the dotted reference does not resolve, or None when it does.
    parts = dotted.split(".")
    if len(parts) > 1 and _PROTO_PACKAGE.match(parts[1]):
        return None
    for length in range(len(parts), 0, -1):
        found = tree.module_file(".".join(parts[:length]))
        if found is None:
            continue
        # A C extension without a stub: its names are not read.
        if length == len(parts) or found.endswith(".c"):
            return None
        if parts[length] in _top_level_names(tree.root / found):
            return None
        return f"names {parts[length]}, which {found} does not define"
    return "names a module that does not exist"


def _line(text: _Text, offset: int) -> int:
    return text.line + text.text.count("\n", 0, offset)


def _path_references(tree: Tree, name: str, text: _Text) -> Iterator[Missing]:
    for match in _PATH.finditer(text.text):
        path = _NODE_ID.sub("", match.group(1)).rstrip(".,")
        first = path.partition("/")[0]
        if first not in tree.top:
            continue
        follows = text.text[match.end() : match.end() + 1]
        if follows in _AFTER_PATH_SKIP and not path.endswith("/"):
            continue
        if not tree.exists(path.rstrip("/")):
            yield Missing(name, _line(text, match.start()), path, "does not exist")


def _module_references(tree: Tree, name: str, text: _Text) -> Iterator[Missing]:
    seen: set[tuple[int, str]] = set()
    for match in _MODULE.finditer(text.text):
        seen.add((match.start(1), match.group(1)))
    for span in _CODE_SPAN.finditer(text.text):
        dotted = _DOTTED.fullmatch(span.group(1).strip())
        if (
            dotted is not None
            and dotted.group(1).partition(".")[0] in tree.folders
            and dotted.group(1).rpartition(".")[2] not in _FILE_SUFFIXES
        ):
            seen.add((span.start(1), dotted.group(1)))
    for offset, dotted_name in sorted(seen):
        why = _check_module(tree, dotted_name)
        if why is not None:
            yield Missing(name, _line(text, offset), dotted_name, why)


def _markdown_references(tree: Tree, name: str, text: _Text) -> Iterator[Missing]:
    here = Path(name).parent
    links = list(_LINK.finditer(text.text)) if name.endswith(".md") else []
    for match in links:
        target = match.group(1).partition("#")[0]
        if not target or re.match(r"^[a-z]+:", target) or target.startswith("/"):
            continue
        if not tree.has(os.path.normpath(here / target)):
            yield Missing(name, _line(text, match.start()), target, "(a link) does not exist")
    in_links = [range(*link.span()) for link in links]
    for match in _MARKDOWN_NAME.finditer(text.text):
        if match.group(1) in WRITTEN or any(match.start() in link for link in in_links):
            continue
        places = {match.group(1), f"docs/{match.group(1)}", (here / match.group(1)).as_posix()}
        if not any(tree.has(place) for place in places):
            yield Missing(name, _line(text, match.start()), match.group(1), "does not exist")


def check(root: Path, files: Iterable[str] | None = None) -> list[Missing]:
    """Every reference in the tree at ``root`` that does not resolve.

    Args:
        root: the repository root.
        files: the files to read, relative to ``root`` (:func:`source_files` by default).

    Returns:
        The missing references, in file and line order.
    """
    tree = Tree(root, files)
    found: list[Missing] = []
    for name in sorted(tree.files):
        source = (root / name).read_text(encoding="utf-8")
        for text in _texts(name, source):
            found += _path_references(tree, name, text)
            found += _module_references(tree, name, text)
            found += _markdown_references(tree, name, text)
    return sorted(set(found), key=lambda m: (m.path, m.line, m.reference))


def main(argv: list[str] | None = None) -> int:
    """Run the check; print what is missing to stderr.

    Returns:
        0 when every reference resolves, 1 otherwise.
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args(argv)
    missing = check(args.root)
    if missing:
        print(f"check_paths: {len(missing)} reference(s) to nothing:", file=sys.stderr)
        for item in missing:
            print(f"  {item}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
