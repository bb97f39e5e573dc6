"""Parsing ``fix44``: one FIX 4.4 / FIX 5.0 SP2 market-data message -> a :class:`SourceMessage`.

Theory of operation
-------------------
:class:`Fix44Converter` checks a message body against the data dictionary
(:mod:`adapter.formats.fix44.dictionary`) and converts it whole or not at
all: any fault raises :class:`~adapter.errors.ConversionError` with the reason
(one of :data:`FIX44_REASONS`) and nothing of the message is used.

* ``35=X`` and ``35=W``: header and body fields, then the ``268`` group. An
  entry opens with the group's delimiter (``279`` in ``X``, ``269`` in ``W``);
  its other fields may come in any order, each at most once; a field of the
  group seen outside an entry, or an entry field repeated, is malformed.
  Tags the dictionary does not define are ignored.
* Every entry of an ``X`` names its symbol by ``55``, or by ``48``/``22``
  through the security table, or inherits the previous entry's; a ``W``
  names it in its body.
* Any other message type is not market data: :data:`SKIPPED` is raised (the
  adapter counts it and uses up its ``34``; a ``35=4`` SequenceReset is
  recognized before that, as for every format).

Pure: no sockets, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from feedha.adapter.conversion.engine import SKIPPED
from feedha.adapter.conversion.messages import BookEntry, SourceMessage, SymbolEntries
from feedha.adapter.errors import ConversionError
from feedha.adapter.formats.fix44.dictionary import TYPE_CHECKS, Dictionary, MessageSpec
from feedha.proto.wire import MAX_SOURCE_SEQ

__all__ = ["FIX44_REASONS", "SKIPPED", "Fix44Converter"]

FIX44_REASONS: Final = frozenset(
    {
        SKIPPED,
        "bad_field",  # a field without "=" or a tag that is not a number
        "missing_seq",
        "bad_seq",  # 34= not a positive integer, or past MAX_SOURCE_SEQ
        "missing_field",  # a required tag is absent (named in the detail)
        "bad_value",  # a value of the wrong type or outside its enum (named in the detail)
        "duplicate_tag",
        "bad_group",  # a group field outside an entry, or the group twice
        "missing_entry_count",
        "bad_entry_count",
        "entry_count_mismatch",
        "missing_symbol",
        "unknown_security",
        "book_full",
        "oversize",
    }
)
_SOH: Final = b"\x01"
_ACTIONS: Final = {"0": 0, "1": 1, "2": 2}
_BOOK_TYPES: Final = frozenset({"0", "1"})
Fields = dict[int, bytes]


class Fix44Converter:
    """Parses ``fix44`` message bodies (see the module docstring).

    Args:
        dictionary: the checked data dictionary.
        securities: ``SecurityID`` (or ``SecurityIDSource:SecurityID``) -> symbol.
    """

    def __init__(self, dictionary: Dictionary, securities: Mapping[str, str] | None = None) -> None:
        self.dictionary = dictionary
        self.securities = dict(securities or {})
        self._checks = {tag: TYPE_CHECKS[spec.type] for tag, spec in dictionary.fields.items()}

    def __repr__(self) -> str:
        return f"<Fix44Converter [{self.dictionary.name}, securities={len(self.securities)}]>"

    def parse(self, body: bytes) -> SourceMessage:
        """Convert one message body (from ``35=`` up to the SOH before ``10=``).

        Raises:
            ConversionError: with ``reason`` one of :data:`FIX44_REASONS`.
        """
        pairs = _split(body)
        msg_type = pairs[0][1].decode(errors="replace") if pairs and pairs[0][0] == 35 else ""
        spec = self.dictionary.messages.get(msg_type)
        if spec is None:
            raise ConversionError(SKIPPED, f"35={msg_type[:8]!r} is not market data")
        fields, groups = self._structure(pairs, spec)
        source_seq = self._header(fields)
        time_tag = 60 if 60 in fields else 52
        event_time_ns = self._value(fields, time_tag) if time_tag in fields else 0
        updates: tuple[SymbolEntries, ...]
        if spec.msg_type == "W":
            updates = (SymbolEntries(self._symbol(fields, ""), tuple(self._entry(g, spec) for g in groups)),)
        else:
            if not groups:
                raise ConversionError("bad_entry_count", "268=0: an incremental refresh without entries")
            updates = self._by_symbol(groups, spec)
        first = updates[0].symbol
        return SourceMessage(
            source_seq, first, event_time_ns, (), (), updates=updates, full_refresh=spec.msg_type == "W"
        )

    def _structure(self, pairs: list[tuple[int, bytes]], spec: MessageSpec) -> tuple[Fields, list[Fields]]:
        """Sort the fields into the header and body, and the group's entries; check the shape."""
        group, known = spec.group, self.dictionary.fields
        body_tags = self.dictionary.header_fields | spec.fields
        fields: Fields = {}
        groups: list[Fields] = []
        count: int | None = None
        in_group = False
        for tag, value in pairs:
            if tag == group.count:
                if count is not None:
                    raise ConversionError("bad_group", f"{group.count}= twice")
                count = self._number(tag, value)
                in_group = True
            elif in_group and tag == group.delimiter:
                groups.append({tag: value})
            elif in_group and groups and tag in group.fields and tag not in groups[-1]:
                groups[-1][tag] = value
            elif in_group and groups and tag in groups[-1]:
                raise ConversionError("duplicate_tag", f"{tag}= twice in entry {len(groups)}")
            elif tag in body_tags:
                if tag in fields:
                    raise ConversionError("duplicate_tag", f"{tag}= twice")
                fields[tag] = value
                in_group = False if groups else in_group
            elif tag in group.fields:
                raise ConversionError("bad_group", f"{tag}= outside an entry of the {group.count}= group")
            elif tag not in known:
                continue  # a tag the dictionary does not define: ignored
        if count is None:
            raise ConversionError("missing_entry_count", f"no {group.count}= field")
        if count != len(groups):
            raise ConversionError("entry_count_mismatch", f"{group.count}={count} but {len(groups)} entries")
        for tag in spec.required:
            if tag not in fields:
                raise ConversionError("missing_field", f"no {tag}= ({known[tag].name})")
        return fields, groups

    def _header(self, fields: Fields) -> int:
        raw_seq = fields.get(34)
        if raw_seq is None:
            raise ConversionError("missing_seq", "no 34= field")
        if not raw_seq.isdigit() or raw_seq[:1] == b"0":
            raise ConversionError("bad_seq", f"34={raw_seq[:24]!r}")
        for tag in self.dictionary.header_required:
            if tag not in fields:
                raise ConversionError("missing_field", f"no {tag}= ({self.dictionary.fields[tag].name})")
        for tag in fields:
            self._value(fields, tag)  # 34= is a seqnum of at most 19 digits
        source_seq = int(raw_seq)
        if source_seq > MAX_SOURCE_SEQ:
            raise ConversionError("bad_seq", f"34={source_seq} is past {MAX_SOURCE_SEQ}")
        return source_seq

    def _value(self, fields: Fields, tag: int) -> Any:
        spec = self.dictionary.fields[tag]
        raw = fields[tag]
        try:
            value = self._checks[tag](raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ConversionError(
                "bad_value", f"{tag}={raw[:24]!r} ({spec.name}, {spec.type}): {exc}"
            ) from exc
        if spec.values is not None and value not in spec.values:
            raise ConversionError("bad_value", f"{tag}={raw[:8]!r} ({spec.name}) is not one of its values")
        return value

    def _number(self, tag: int, raw: bytes) -> int:
        if not raw.isdigit() or len(raw) > 6:
            raise ConversionError("bad_entry_count", f"{tag}={raw[:24]!r}")
        return int(raw)

    def _symbol(self, fields: Fields, inherited: str) -> str:
        if 55 in fields:
            symbol: str = self._value(fields, 55)
            return symbol
        if 48 in fields:
            security: str = self._value(fields, 48)
            source: str = self._value(fields, 22) if 22 in fields else ""
            found = self.securities.get(f"{source}:{security}") or self.securities.get(security)
            if found is None:
                raise ConversionError("unknown_security", f"48={security[:24]!r} 22={source[:8]!r}")
            return found
        if inherited:
            return inherited
        raise ConversionError("missing_symbol", "no 55= or 48= for the entry's instrument")

    def _by_symbol(self, groups: list[Fields], spec: MessageSpec) -> tuple[SymbolEntries, ...]:
        per_symbol: dict[str, list[BookEntry]] = {}
        symbol = ""
        for group in groups:
            symbol = self._symbol(group, symbol)
            per_symbol.setdefault(symbol, []).append(self._entry(group, spec))
        return tuple(SymbolEntries(name, tuple(entries)) for name, entries in per_symbol.items())

    def _entry(self, group: Fields, spec: MessageSpec) -> BookEntry:
        for tag in spec.group.required:
            if tag not in group:
                raise ConversionError(
                    "missing_field", f"entry without {tag}= ({self.dictionary.fields[tag].name})"
                )
        for tag in group:
            self._value(group, tag)
        entry_type = self._value(group, 269)
        action = _ACTIONS.get(self._value(group, 279), -1) if spec.msg_type == "X" and 279 in group else 0
        if action < 0:
            raise ConversionError("bad_value", f"279={group[279][:4]!r}: only 0 New, 1 Change, 2 Delete")
        level = self._value(group, 1023) if 1023 in group else None
        if level is not None and level < 1:
            raise ConversionError("bad_value", f"1023={level}: levels count from 1")
        orders = self._value(group, 346) if 346 in group else 0
        size = self._value(group, 271) if 271 in group else None
        if orders < 0 or (size is not None and size < 0):
            raise ConversionError("bad_value", "a negative 271= or 346=")
        needs = self.dictionary.entry_needs.get(entry_type, ())
        if action == 2:  # a Delete needs only what locates it
            needs = (270,) if entry_type in _BOOK_TYPES and level is None else ()
        for tag in needs:
            if tag not in group:
                raise ConversionError("missing_field", f"269={entry_type} 279={action} entry without {tag}=")
        price = self._value(group, 270) if 270 in group else None
        return BookEntry(action, entry_type, price, size, level, orders)


def _split(body: bytes) -> list[tuple[int, bytes]]:
    pairs: list[tuple[int, bytes]] = []
    for part in body.split(_SOH):
        if not part:
            continue
        tag, sep, value = part.partition(b"=")
        if not sep or not tag.isdigit() or len(tag) > 6:
            raise ConversionError("bad_field", f"not a tag=value field: {part[:24]!r}")
        pairs.append((int(tag), value))
    return pairs
