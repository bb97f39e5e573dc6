"""Which optional parts of feedha are installed, and what to tell a user who lacks one.

The base install (``pip install feedha``) is the client: ``feedha.client``,
``feedha subscribe`` and ``feedctl``. Each other command needs an *extra*
(``pip install 'feedha[adapter]'``, ``[admin]``, ``[spark]``, ``[bench]``, ``[metrics]``, or
``[all]``). The extras and their distributions are read from the installed
package's own metadata (``pyproject.toml`` is the one place that lists them),
so this module never repeats a dependency list.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Iterable, Sequence
from typing import Final

DISTRIBUTION: Final = "feedha"
# "pyspark>=4.0; extra == \"spark\"" -> ("pyspark", "spark"); "feedha[adapter,admin]; extra == 'all'" too.
_REQUIREMENT: Final = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")
_EXTRA_MARKER: Final = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements_by_extra() -> dict[str, list[tuple[str, tuple[str, ...]]]]:
    """Each extra's requirements as ``(distribution, its extras)``, from the installed metadata.

    Returns:
        ``{"": [base requirements], "adapter": [...], ...}``; empty when feedha's
        metadata is not installed (a bare source tree).
    """
    try:
        lines = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return {}
    table: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for line in lines:
        requirement, _semicolon, marker = line.partition(";")
        match = _REQUIREMENT.match(requirement)
        if match is None:
            continue
        extra = _EXTRA_MARKER.search(marker)
        wanted = tuple(e.strip() for e in (match.group(2) or "").split(",") if e.strip())
        table.setdefault(extra.group(1) if extra else "", []).append((match.group(1), wanted))
    return table


def _is_installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def missing(extras: Iterable[str]) -> list[str]:
    """The distributions that the given extras need and that are not installed.

    Args:
        extras: extra names, e.g. ``("adapter", "admin")``. An extra that names
            feedha's own other extras (``all = ["feedha[adapter,admin,...]"]``) is followed.

    Returns:
        Distribution names, sorted; empty when everything is there (or when
        feedha's metadata is not installed, where nothing can be said).
    """
    table = requirements_by_extra()
    todo, seen, absent = list(extras), set(), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for name, nested in table.get(extra, ()):
            if _normalize(name) == DISTRIBUTION:
                todo.extend(nested)
            elif not _is_installed(name):
                absent.add(name)
    return sorted(absent)


def install_hint(extras: Sequence[str]) -> str:
    """The pip command that installs ``extras``, e.g. ``pip install 'feedha[adapter,admin]'``."""
    return f"pip install '{DISTRIBUTION}[{','.join(extras)}]'"


def missing_message(command: str, extras: Sequence[str]) -> str | None:
    """What to tell a user who runs ``command`` without its extras (None: nothing is missing).

    Args:
        command: the command as typed, e.g. ``"feedha adapter"``.
        extras: the extras it needs.
    """
    absent = missing(extras)
    if not absent:
        return None
    return (
        f"{command} needs the feedha extra{'s' if len(extras) > 1 else ''} "
        f"{', '.join(f'[{e}]' for e in extras)} (missing: {', '.join(absent)}); "
        f"install it with: {install_hint(extras)}"
    )


def version() -> str:
    """The installed feedha version ("unknown" from a source tree without metadata)."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
