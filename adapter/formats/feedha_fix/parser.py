"""``feedha-fix``'s parsing: one source FIX message body -> a :class:`SourceMessage`, by the converter table.

Theory of operation
-------------------
:class:`Converter` compiles a :class:`~adapter.formats.feedha_fix.table.ConverterTable`
once into local lookups, so ``parse`` does one ``split`` and one dict per
entry, and every failure raises :class:`~adapter.errors.ConversionError` with a
machine-readable ``reason`` (one of :data:`REASONS`) that the adapter counts.
:func:`~adapter.conversion.source_seq.peek_source_seq` reads only the sequence
number, for messages that cannot be converted but must still be accounted for.
Pure: no sockets, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from feedha.adapter.conversion.messages import SourceMessage, SourceUpdateEntry, new_entry
from feedha.adapter.errors import ConversionError
from feedha.adapter.formats.feedha_fix.table import CONVERTERS, ConverterTable, DerivedRule, FieldRule
from feedha.proto import market_pb2
from feedha.proto.wire import MAX_SOURCE_SEQ

__all__ = ["REASONS", "Converter"]

REASONS: Final = frozenset(
    {
        "bad_field",  # a field without "="
        "wrong_msg_type",  # 35= missing or not the table's message type
        "missing_seq",
        "bad_seq",  # 34= not a positive integer, or past MAX_SOURCE_SEQ
        "missing_symbol",
        "bad_symbol",
        "missing_event_time",
        "bad_event_time",
        "missing_entry_count",
        "bad_entry_count",
        "entry_count_mismatch",  # 268= differs from the number of entries
        "missing_entry_type",
        "unknown_entry_type",
        "missing_field",  # an entry without price or size
        "bad_number",  # price or size not a (finite, in-range, non-negative size) number
        "overflow",  # a derived extra (mid, spread ...) past the doubles' range
    }
)

_SOH: Final = b"\x01"
_TRADE: Final = market_pb2.ENTRY_TYPE_TRADE
_BID: Final = market_pb2.ENTRY_TYPE_BID
_ASK: Final = market_pb2.ENTRY_TYPE_ASK
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_MAX_COUNT_DIGITS: Final = 9  # no message holds a billion entries: a longer count cannot match


class Converter:
    """Parses message bodies into :class:`SourceMessage` according to a converter table.

    Args:
        table: the checked table (``ConverterTable.load()`` for the default).
    """

    __slots__ = (
        "table",
        "_msg_type",
        "_seq",
        "_symbol",
        "_event_time",
        "_count_tag",
        "_start_tag",
        "_type_tag",
        "_types",
        "_price",
        "_size",
        "_notional",
        "_notional_is_product",
        "_extra",
    )

    def __init__(self, table: ConverterTable) -> None:
        self.table = table
        self._msg_type = table.message_type.encode()
        self._seq = _compile(table.header["source_seq"])
        self._symbol = _compile(table.header["symbol"])
        self._event_time = _compile(table.header["event_time_ns"])
        self._count_tag = str(table.count_tag).encode()
        self._start_tag = str(table.start_tag).encode()
        self._type_tag = str(table.type_tag).encode()
        self._types = dict(table.entry_types)
        self._price = _compile(table.entry_fields["price"])
        self._size = _compile(table.entry_fields["size"])
        self._notional: DerivedRule | None = table.notional
        # The usual rule gets a fast path; anything else goes through DerivedRule.evaluate.
        self._notional_is_product = (
            table.notional is not None
            and table.notional.op == "mul"
            and sorted(map(str, table.notional.args)) == ["price", "size"]
        )
        self._extra = tuple((rule.target, rule.compile()) for rule in table.extra)

    def __repr__(self) -> str:
        return f"<Converter [msg_type={self.table.message_type}, extra={[name for name, _f in self._extra]}]>"

    def parse(self, body: bytes) -> SourceMessage:
        """Convert one message body.

        Args:
            body: from 35= up to and including the SOH before 10= (see :func:`proto.fix.split_messages`).

        Returns:
            The converted message.

        Raises:
            ConversionError: with ``reason`` one of :data:`REASONS`.
        """
        header: dict[bytes, bytes] = {}
        groups: list[dict[bytes, bytes]] = []
        current = header
        start_tag = self._start_tag
        for part in body.split(_SOH):
            if part:
                tag, sep, value = part.partition(b"=")
                if not sep:
                    raise ConversionError("bad_field", f"field without '=': {part[:24]!r}")
                if tag == start_tag:
                    current = {}
                    groups.append(current)
                current[tag] = value
        # Strategy: an optimistic path with no per-field bookkeeping; anything odd
        # (a KeyError, a ValueError, a failed check) falls back to the checked
        # path, which gives the same result on good input and names the reason
        # on bad input. Tests compare the two paths.
        try:
            return self._parse_fast(header, groups)
        except (KeyError, ValueError, UnicodeDecodeError):
            return self._parse_checked(header, groups)

    def _parse_fast(self, header: dict[bytes, bytes], groups: list[dict[bytes, bytes]]) -> SourceMessage:
        if header[b"35"] != self._msg_type:
            raise ValueError("35=")
        seq_tag, seq_function, _scale, _target = self._seq
        source_seq = seq_function(header[seq_tag])
        symbol_tag, symbol_function, _scale, _target = self._symbol
        symbol = symbol_function(header[symbol_tag])
        time_tag, time_function, time_scale, _target = self._event_time
        event_time_ns = time_function(header[time_tag])
        if time_scale is not None:
            event_time_ns *= time_scale
        if not _INT64_MIN <= event_time_ns <= _INT64_MAX:
            raise ValueError("event time")
        count_raw = header[self._count_tag]
        if not 0 < source_seq <= MAX_SOURCE_SEQ or _entry_count(count_raw) != len(groups):
            raise ValueError("seq or count")
        types = self._types
        type_tag = self._type_tag
        price_tag, price_function, price_scale, _target = self._price
        size_tag, size_function, size_scale, _target = self._size
        notional_rule = self._notional
        notional_types = None if notional_rule is None else notional_rule.types
        is_product = self._notional_is_product
        entries: list[SourceUpdateEntry] = []
        for group in groups:
            entry_type = types[group[type_tag]]
            price = float(price_function(group[price_tag]))
            if price_scale is not None:
                price *= price_scale
                if not math.isfinite(price):
                    raise ValueError("price overflow")
            size = size_function(group[size_tag])
            if size_scale is not None:
                size *= size_scale
            if size < 0:
                raise ValueError("size")
            if notional_rule is None or (notional_types is not None and entry_type not in notional_types):
                notional = 0.0
            elif is_product:
                notional = price * size
            else:
                notional = notional_rule.evaluate({"price": price, "size": size}) or 0.0
            entries.append(new_entry(SourceUpdateEntry, (entry_type, price, size, notional)))
        entry_tuple = tuple(entries)
        extra = self._extras(entry_tuple) if self._extra else ()
        return SourceMessage(source_seq, symbol, event_time_ns, entry_tuple, extra)

    def _parse_checked(self, header: dict[bytes, bytes], groups: list[dict[bytes, bytes]]) -> SourceMessage:
        msg_type = header.get(b"35")
        if msg_type != self._msg_type:
            raise ConversionError("wrong_msg_type", f"35={msg_type!r}, expected {self._msg_type!r}")
        source_seq = _convert_field(self._seq, header, "missing_seq", "bad_seq")
        if not 0 < source_seq <= MAX_SOURCE_SEQ:
            raise ConversionError("bad_seq", f"source_seq {source_seq} must be from 1 to {MAX_SOURCE_SEQ}")
        symbol = _convert_field(self._symbol, header, "missing_symbol", "bad_symbol")
        event_time_ns = _convert_field(self._event_time, header, "missing_event_time", "bad_event_time")
        if not _INT64_MIN <= event_time_ns <= _INT64_MAX:  # a scaled to_int: the block's time is an int64
            raise ConversionError("bad_event_time", f"event time {event_time_ns} is past int64")
        count_raw = header.get(self._count_tag)
        if count_raw is None:
            raise ConversionError("missing_entry_count", f"no {self._count_tag.decode()}= field")
        count = _entry_count(count_raw)
        if count is None:
            raise ConversionError("bad_entry_count", f"{self._count_tag.decode()}={count_raw[:24]!r}")
        if count != len(groups):
            raise ConversionError(
                "entry_count_mismatch",
                f"{self._count_tag.decode()}={count_raw[:24].decode()} but {len(groups)} entries",
            )
        entries = tuple(self._entry(group) for group in groups)
        extra = self._extras(entries) if self._extra else ()
        return SourceMessage(source_seq, symbol, event_time_ns, entries, extra)

    def _entry(self, group: dict[bytes, bytes]) -> SourceUpdateEntry:
        wire_type = group.get(self._type_tag)
        if wire_type is None:
            raise ConversionError("missing_entry_type", f"entry without {self._type_tag.decode()}=")
        entry_type = self._types.get(wire_type)
        if entry_type is None:
            raise ConversionError("unknown_entry_type", f"{self._type_tag.decode()}={wire_type[:8]!r}")
        price = float(_convert_field(self._price, group, "missing_field", "bad_number"))
        if not math.isfinite(price):
            raise ConversionError("bad_number", f"price {price} after scaling")
        size = _convert_field(self._size, group, "missing_field", "bad_number")
        if size < 0:
            raise ConversionError("bad_number", f"negative size {size}")
        rule = self._notional
        if rule is None or (rule.types is not None and entry_type not in rule.types):
            notional = 0.0
        elif self._notional_is_product:
            notional = price * size
        else:
            notional = rule.evaluate({"price": price, "size": size}) or 0.0
        return SourceUpdateEntry(entry_type, price, size, notional)

    def _extras(self, entries: tuple[SourceUpdateEntry, ...]) -> tuple[tuple[str, float], ...]:
        env: dict[str, float] = {}
        trade_size = 0
        trade_notional = 0.0
        for entry_type, price, size, notional in entries:
            if entry_type == _TRADE:
                env["trade_price"] = price
                trade_size += size
                trade_notional += notional
            elif entry_type == _BID:
                env["bid"] = price
            elif entry_type == _ASK:
                env["ask"] = price
        if "trade_price" in env:
            env["trade_size"] = float(trade_size)
            env["trade_notional"] = trade_notional
        result: list[tuple[str, float]] = []
        for name, evaluate in self._extra:
            value = evaluate(env)
            if value is not None:
                if not math.isfinite(value):  # past the doubles' range (as the C fast path refuses it)
                    raise ConversionError("overflow", f"extra {name} is not a finite number")
                env[name] = value
                result.append((name, value))
        return tuple(result)


# (tag bytes, converter function, scale or None, target name)
_Compiled = tuple[bytes, Callable[[bytes], Any], float | int | None, str]


def _compile(rule: FieldRule) -> _Compiled:
    return (rule.tag_bytes, CONVERTERS[rule.convert], rule.scale, rule.target)


def _convert_field(
    compiled: _Compiled,
    fields: dict[bytes, bytes],
    missing: str,
    bad: str,
) -> Any:
    tag, function, scale, target = compiled
    raw = fields.get(tag)
    if raw is None:
        raise ConversionError(missing, f"no {tag.decode()}= field ({target})")
    try:
        value = function(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConversionError(bad, f"{tag.decode()}={raw[:24]!r} ({target}): {exc}") from exc
    return value if scale is None else value * scale


def _entry_count(raw: bytes) -> int | None:
    """A count field's value: ``None`` when it is not digits, -1 when it has too many to match."""
    if not raw.isdigit():
        return None
    digits = raw.lstrip(b"0")
    return -1 if len(digits) > _MAX_COUNT_DIGITS else int(digits or b"0")
