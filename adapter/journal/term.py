"""The highest term an adapter has known, kept beside its journal.

A term fences: subscribers ignore lines of a lower term than the highest they
have seen. If a whole group restarted and forgot its terms, the new active
would start again at a low term and every connected subscriber would fence
it out. So every adapter writes the highest term it has known to
``term.json`` in its journal directory whenever that term grows (a rare
event: promotions), and restart recovery starts from it.

File: one JSON object, ``{"term": N}`` (0 <= N < 2**32), replaced atomically.
A missing file is term 0; an unreadable one is logged and taken as 0 (the
group's own terms, heard at start-up, still lift it).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Final

from feedha.adapter.journal.durable import replace_durably

logger = logging.getLogger(__name__)

__all__ = ["TERM_FILE", "read_term", "write_term"]

TERM_FILE: Final = "term.json"
MAX_TERM: Final = 0xFFFFFFFF


def read_term(directory: str | Path) -> int:
    """The term recorded in ``directory`` (0 when there is none or it is unreadable)."""
    path = Path(directory) / TERM_FILE
    try:
        value = json.loads(path.read_bytes())["term"]
    except FileNotFoundError:
        return 0
    except (OSError, ValueError, KeyError, TypeError) as exc:
        logger.warning("ignoring the unreadable term file %s: %s", path, exc)
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TERM:
        logger.warning("ignoring the term file %s: term %r out of range", path, value)
        return 0
    return value


def write_term(directory: str | Path, term: int) -> None:
    """Record ``term`` in ``directory``, atomically and durably."""
    if not 0 <= term <= MAX_TERM:
        raise ValueError(f"term must be in 0..{MAX_TERM}, got {term}")
    replace_durably(Path(directory) / TERM_FILE, json.dumps({"term": term}).encode())
