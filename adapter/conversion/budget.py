"""One memory budget per adapter: what its conversion tables may hold, counted in bytes.

Theory of operation
-------------------
An adapter's memory is a base -- the interpreter and its libraries, the ring
of recent source frames (64 MiB at most), the sockets' queues -- and its
conversion tables, which grow with what the venue sends: live orders
(``itch50``), symbols (every format) and price levels (``fix44``). The
adapter's budget (``--memory-budget``; by default :data:`MEMORY_HEADROOM` of
its container's memory limit, or :data:`DEFAULT_MEMORY_BUDGET` outside a
container) less :data:`BASE_BYTES` is what the tables may hold
(:func:`table_bytes`).

The tables never read the process's RSS: it differs from process to process,
and every adapter of a group must refuse the same message. They count what
they hold at a fixed cost an entry -- :data:`ORDER_BYTES`,
:data:`ITCH50_SYMBOL_BYTES`, :data:`FIX44_SYMBOL_BYTES`, :data:`LEVEL_BYTES`,
:data:`FEEDHA_FIX_SYMBOL_BYTES`, measured with ``python -m
feedha.bench.table_bytes`` (docs/deployment.md) and rounded up -- and refuse
a message whose entries would take the count past the tables' budget: it is
quarantined as ``memory_limit`` on every adapter that runs the same budget,
at the same place in the stream. An order's cost covers a price level of its
own (a sender may give every order its own price) and its table's slot as the
table grows (in place: one array at a time).

The group: the active names its tables' budget in every report, and a backup
runs with the active's (:func:`adopted_budget`): one whose own is larger
adopts the active's, smaller, and refuses exactly what the active refuses;
one whose own is smaller cannot hold what the active holds and fails itself,
saying so, rather than be killed for memory later.

Everything here is pure: the container's limit is read by the entry point
and handed to :func:`budget_from_limit`.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "BASE_BYTES",
    "DEFAULT_MEMORY_BUDGET",
    "DEFAULT_TABLE_BYTES",
    "FEEDHA_FIX_SYMBOL_BYTES",
    "FIX44_SYMBOL_BYTES",
    "ITCH50_SYMBOL_BYTES",
    "LEVEL_BYTES",
    "MEMORY_HEADROOM",
    "MIN_MEMORY_BUDGET",
    "ORDER_BYTES",
    "adopted_budget",
    "budget_from_limit",
    "container_limit",
    "format_size",
    "parse_size",
    "table_bytes",
]

MiB: Final = 1 << 20
GiB: Final = 1 << 30
MEMORY_HEADROOM: Final = 0.75  # the budget is this share of the container's memory limit
DEFAULT_MEMORY_BUDGET: Final = 768 * MiB  # outside a container (a 1 GiB machine's share)
# An adapter besides its tables: ~60 MiB idle (interpreter, libraries, sockets), the ring of
# recent source frames (64 MiB at most), the journal's buffers and the queues at their marks.
BASE_BYTES: Final = 256 * MiB
MIN_MEMORY_BUDGET: Final = BASE_BYTES + 16 * MiB  # the tables get at least 16 MiB
DEFAULT_TABLE_BYTES: Final = DEFAULT_MEMORY_BUDGET - BASE_BYTES  # a state's own default (512 MiB)
# What the tables count an entry at: the worst case of what python -m feedha.bench.table_bytes
# measures (docs/deployment.md, "Memory"), since the counts must hold whatever a sender does.
# itch50: a live order -- its record in the order table (20 bytes at 3/4 to 1/2 full: up to 40;
# the table grows by half in place, never holding two arrays) and a price level of its own (a
# 48-byte node in a side's array, up to 96 just after that array doubles): measured 33 bytes at
# 1,000,000 orders on 400 prices a side, 104 with a level each. A stock: its name, sides and
# values (1,364).
ORDER_BYTES: Final = 144
ITCH50_SYMBOL_BYTES: Final = 1_536
# fix44: a symbol's record in the C table, its sides' first arrays and index slot (442 measured);
# a price level (49 measured at 2,000 a side, up to 96 just after a side's array doubles).
FIX44_SYMBOL_BYTES: Final = 512
LEVEL_BYTES: Final = 96
# feedha-fix: a symbol's record in the C state, its name and index slot (128 measured; the
# record array doubles too).
FEEDHA_FIX_SYMBOL_BYTES: Final = 256
_UNITS: Final = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
    "ki": 1 << 10, "kib": 1 << 10, "mi": MiB, "mib": MiB, "gi": GiB, "gib": GiB,
}  # fmt: skip
_SIZE: Final = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*")
_NO_LIMIT: Final = 1 << 60  # cgroup v1 says "no limit" with a number about 2**63


def parse_size(text: str) -> int:
    """Bytes from ``768Mi``, ``1GiB``, ``1.5G``, ``500MB`` or ``805306368`` (Kubernetes' suffixes too).

    Raises:
        ValueError: not a size, naming the text.
    """
    match = _SIZE.fullmatch(text)
    unit = _UNITS.get(match.group(2).lower()) if match else None
    if match is None or unit is None:
        raise ValueError(f"{text!r} is not a size (bytes, or a number with k/M/G or Ki/Mi/Gi, e.g. 768Mi)")
    return int(float(match.group(1)) * unit)


def format_size(size: int) -> str:
    """A size as an operator reads it: ``768 MiB``, ``1.5 GiB``."""
    if size >= GiB:
        return f"{size / GiB:.3g} GiB"
    return f"{size / MiB:.4g} MiB"


def container_limit(v2: str | None, v1: str | None) -> int | None:
    """The container's memory limit from its cgroup files' text, or ``None`` when there is none.

    Args:
        v2: ``memory.max`` (cgroup v2): a number of bytes, or ``max``.
        v1: ``memory.limit_in_bytes`` (cgroup v1): a number, about 2**63 when unlimited.
    """
    for text in (v2, v1):
        value = (text or "").strip()
        if value.isdigit() and 0 < int(value) < _NO_LIMIT:
            return int(value)
    return None


def budget_from_limit(limit: int | None) -> int:
    """The default budget: :data:`MEMORY_HEADROOM` of the container's ``limit``, else the fixed default."""
    return DEFAULT_MEMORY_BUDGET if limit is None else int(limit * MEMORY_HEADROOM)


def table_bytes(memory_budget: int) -> int:
    """What the conversion tables may count, of an adapter's ``memory_budget``.

    Raises:
        ValueError: a budget under :data:`MIN_MEMORY_BUDGET`.
    """
    if memory_budget < MIN_MEMORY_BUDGET:
        raise ValueError(
            f"a memory budget of {format_size(memory_budget)} leaves the tables nothing: at least "
            f"{format_size(MIN_MEMORY_BUDGET)} ({format_size(BASE_BYTES)} for the adapter itself)"
        )
    return memory_budget - BASE_BYTES


def adopted_budget(own: int, active: int) -> int | None:
    """The tables' budget a backup runs with when its active announces ``active`` (``own``: its own).

    Returns:
        ``active`` when this adapter can hold it (it is no larger than ``own``), or ``None``:
        it cannot, and must not stay in the group (it fails itself).
    """
    return active if 0 < active <= own else (own if active == 0 else None)
