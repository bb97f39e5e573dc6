"""What the C fast path takes: a converter table compiled into its spec, and the numbers both sides share.

Theory of operation
-------------------
``_fastpath.c`` runs only converter tables it reproduces byte for byte.
:func:`compile_spec` translates a :class:`~adapter.formats.feedha_fix.table.ConverterTable`
into the dict ``FastPath(state, spec)`` reads, and raises :class:`Unsupported`,
naming the feature, for a table that uses anything the C code does not
implement (scales, a notional other than ``price * size``, extras other than
two named arguments, more extras than :data:`MAX_EXTRAS`);
:func:`adapter.formats.feedha_fix.choice.make_engine` then runs the reference engine.

The op codes, time and price kinds, the fixed inputs of the C environment and
the limits below are defined here once: ``scripts/gen_constants.py`` writes
them into ``_fastpath_constants.h`` (``OP_ADD``, ``TIME_FIX``, ``ENV_FIXED``
...), and a test compares what the built extension exports with them.

Pure: no sockets, no clock, and no import of the extension (this module
works where it is not built).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from typing import Any, Final

from feedha.adapter.formats.feedha_fix.table import EXTRA_INPUTS, ConverterTable, FieldRule

__all__ = ["ENV_INPUTS", "MAX_EXTRAS", "Op", "PriceKind", "TimeKind", "Unsupported", "compile_spec"]

# The fixed inputs of the C module's environment, in slot order (ENV_FIXED of them);
# each extra's result takes the next slot.
ENV_INPUTS: Final = ("bid", "ask", "trade_price", "trade_size", "trade_notional")
MAX_EXTRAS: Final = 16  # the extras a spec may hold (the C code keeps them in fixed arrays)

assert set(ENV_INPUTS) == EXTRA_INPUTS


class Op(enum.IntEnum):
    """An extra's operation (the converter table's ``op``, by its lower-case name)."""

    ADD = 0
    SUB = 1
    MUL = 2
    DIV = 3
    MEAN = 4
    MIN = 5
    MAX = 6


class TimeKind(enum.IntEnum):
    """How the event-time field is read."""

    FIX = 0  # to_timestamp_ns: FIX UTC timestamp text
    INT = 1  # to_int: integer ns


class PriceKind(enum.IntEnum):
    """How an entry's price is read."""

    DOUBLE = 0  # to_double
    INT = 1  # to_int


_OPS: Final = {op.name.lower(): op for op in Op}
_TIME_KINDS: Final = {"to_timestamp_ns": TimeKind.FIX, "to_int": TimeKind.INT}
_PRICE_KINDS: Final = {"to_double": PriceKind.DOUBLE, "to_int": PriceKind.INT}


class Unsupported(ValueError):
    """The converter table uses a feature the C fast path does not implement."""


def compile_spec(table: ConverterTable) -> dict[str, Any]:
    """Translate a converter table into the C module's ``FastPath`` spec.

    Args:
        table: a checked converter table.

    Returns:
        The spec dict.

    Raises:
        Unsupported: naming the table feature the fast path lacks.
    """
    header = table.header
    fields = table.entry_fields
    rules: Mapping[str, FieldRule] = {**header, **fields}
    for name, field_rule in rules.items():
        if field_rule.scale is not None:
            raise Unsupported(f"{name} has a scale")
    if header["source_seq"].convert != "to_int" or header["symbol"].convert != "to_str":
        raise Unsupported("source_seq/symbol converters")
    if fields["size"].convert != "to_int":
        raise Unsupported("size converter")
    if header["event_time_ns"].convert not in _TIME_KINDS or fields["price"].convert not in _PRICE_KINDS:
        raise Unsupported("event time or price converter")
    notional_kind, notional_mask = _notional(table)
    return {
        "msg_type": table.message_type.encode(),
        "seq_tag": header["source_seq"].tag,
        "symbol_tag": header["symbol"].tag,
        "time_tag": header["event_time_ns"].tag,
        "time_kind": int(_TIME_KINDS[header["event_time_ns"].convert]),
        "count_tag": table.count_tag,
        "start_tag": table.start_tag,
        "type_tag": table.type_tag,
        "price_tag": fields["price"].tag,
        "price_kind": int(_PRICE_KINDS[fields["price"].convert]),
        "size_tag": fields["size"].tag,
        "notional_kind": notional_kind,
        "notional_mask": notional_mask,
        "types": list(table.entry_types.items()),  # (wire bytes, EntryType value)
        "extras": _extras(table),
        # add/mean go through math.fsum, whose sign for a sum of negative zeros is the Python's.
        "fsum_negative_zero": int(math.copysign(1.0, math.fsum((-0.0, -0.0))) < 0),
    }


def _notional(table: ConverterTable) -> tuple[int, int]:
    # (kind, mask of the entry types it applies to): kind 0 none, 1 price * size.
    notional = table.notional
    if notional is None:
        return 0, 0
    if notional.op != "mul" or sorted(map(str, notional.args)) != ["price", "size"]:
        raise Unsupported(f"notional {notional.op}{notional.args}")
    types = notional.types if notional.types is not None else range(32)
    return 1, sum(1 << t for t in types)


def _extras(table: ConverterTable) -> list[tuple[bytes, int, int, int]]:
    # (name, op, environment slot of each argument) per extra, each reading only the
    # fixed inputs and the extras before it.
    if len(table.extra) > MAX_EXTRAS:
        raise Unsupported(f"{len(table.extra)} extras (the fast path takes {MAX_EXTRAS})")
    slots = {name: index for index, name in enumerate(ENV_INPUTS)}
    extras = []
    for rule in table.extra:
        if rule.op not in _OPS or len(rule.args) != 2 or not all(isinstance(a, str) for a in rule.args):
            raise Unsupported(f"extra {rule.target}: {rule.op} over {rule.args}")
        a, b = (slots.get(str(arg)) for arg in rule.args)
        if a is None or b is None:
            raise Unsupported(f"extra {rule.target} reads an unknown input")
        extras.append((rule.target.encode(), int(_OPS[rule.op]), a, b))
        slots[rule.target] = len(ENV_INPUTS) + len(extras) - 1
    return extras
