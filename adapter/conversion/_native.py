"""The native conversion engine: runs in the C fast path (:mod:`adapter.conversion._fastpath`).

Theory of operation
-------------------
The C module converts *runs* of ordinary messages (see the theory of
operation at the top of ``adapter/conversion/_fastpath.c``) and stops at anything else;
the core hands that message to the careful path and resumes. Two things make
that safe:

* one conversion state serves both paths: :class:`NativeConversionState` has
  :class:`~adapter.conversion.state.ConversionState`'s interface over the C ``State``;
* the C path only takes messages and tables it reproduces byte for byte:
  :func:`compile_spec` raises :class:`Unsupported` (naming the feature) for a
  converter table that uses anything it does not implement -- scales, a
  notional other than ``price * size``, extras other than two named
  arguments -- and :func:`unsupported_reason` then says why the reference
  engine must run instead.

This module is pure: no sockets, no clock.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any, Final

from feedha.adapter.conversion.engine import ConversionEngine, RunFunction, RunTuple
from feedha.adapter.conversion.state import (
    DIGEST_MASK,
    ConversionState,
    SymbolValues,
    next_session,
    session_digest,
    symbol_digest,
)
from feedha.adapter.conversion.table import EXTRA_INPUTS, ConverterTable, FieldRule

logger = logging.getLogger(__name__)

try:
    from feedha.adapter.conversion import _fastpath
except ImportError:  # pragma: no cover - the build is broken; the adapter still works, slowly
    _fastpath = None  # type: ignore[assignment]

AVAILABLE: Final = _fastpath is not None

# Order of the fixed inputs in the C module's environment (ENV_FIXED).
_ENV_INPUTS: Final = ("bid", "ask", "trade_price", "trade_size", "trade_notional")
_OPS: Final = {"add": 0, "sub": 1, "mul": 2, "div": 3, "mean": 4, "min": 5, "max": 6}
_TIME_KINDS: Final = {"to_timestamp_ns": 0, "to_int": 1}
_PRICE_KINDS: Final = {"to_double": 0, "to_int": 1}

assert set(_ENV_INPUTS) == EXTRA_INPUTS


class Unsupported(ValueError):
    """The converter table uses a feature the C fast path does not implement."""


def compile_spec(table: ConverterTable) -> dict[str, Any]:
    """Translate a converter table into the C module's ``FastPath`` spec.

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
    notional = table.notional
    notional_kind, notional_mask = 0, 0
    if notional is not None:
        if notional.op != "mul" or sorted(map(str, notional.args)) != ["price", "size"]:
            raise Unsupported(f"notional {notional.op}{notional.args}")
        notional_kind = 1
        types = notional.types if notional.types is not None else range(32)
        notional_mask = sum(1 << t for t in types)
    slots = {name: index for index, name in enumerate(_ENV_INPUTS)}
    extras = []
    for rule in table.extra:
        if rule.op not in _OPS or len(rule.args) != 2 or not all(isinstance(a, str) for a in rule.args):
            raise Unsupported(f"extra {rule.target}: {rule.op} over {rule.args}")
        a, b = (slots.get(str(arg)) for arg in rule.args)
        if a is None or b is None:
            raise Unsupported(f"extra {rule.target} reads an unknown input")
        extras.append((rule.target.encode(), _OPS[rule.op], a, b))
        slots[rule.target] = len(_ENV_INPUTS) + len(extras) - 1
    if header["event_time_ns"].convert not in _TIME_KINDS or fields["price"].convert not in _PRICE_KINDS:
        raise Unsupported("event time or price converter")
    return {
        "msg_type": table.message_type.encode(),
        "seq_tag": header["source_seq"].tag,
        "symbol_tag": header["symbol"].tag,
        "time_tag": header["event_time_ns"].tag,
        "time_kind": _TIME_KINDS[header["event_time_ns"].convert],
        "count_tag": table.count_tag,
        "start_tag": table.start_tag,
        "type_tag": table.type_tag,
        "price_tag": fields["price"].tag,
        "price_kind": _PRICE_KINDS[fields["price"].convert],
        "size_tag": fields["size"].tag,
        "notional_kind": notional_kind,
        "notional_mask": notional_mask,
        "types": list(table.entry_types.items()),  # (wire bytes, EntryType value)
        "extras": extras,
        # add/mean go through math.fsum, whose sign for a sum of negative zeros is the Python's.
        "fsum_negative_zero": int(math.copysign(1.0, math.fsum((-0.0, -0.0))) < 0),
    }


def _values(raw: tuple[Any, ...]) -> SymbolValues:
    return SymbolValues(*raw)


class NativeConversionState(ConversionState):
    """:class:`~adapter.conversion.state.ConversionState` kept in the C module, shared with the fast path.

    Same interface and the same digests (tests compare both).
    """

    __slots__ = ("native",)

    def __init__(self) -> None:
        if _fastpath is None:
            raise RuntimeError("adapter.conversion._fastpath is not built")
        self.native = _fastpath.State()
        self._session = 0

    @property
    def digest(self) -> int:
        return self.native.digest

    @property
    def session(self) -> int:
        return self._session

    @session.setter
    def session(self, session_id: int) -> None:
        self.native.salt = session_digest(session_id)
        self._session = session_id

    def roll(self, session_id: int) -> None:
        session_digest(session_id)  # checks the range before anything changes
        for symbol, raw in self.native.items():
            self.native.set(symbol, next_session(_values(raw)).astuple())
        self.session = session_id

    def recompute_digest(self) -> int:
        total = session_digest(self._session)
        for symbol, raw in self.native.items():
            total += symbol_digest(symbol, _values(raw))
        return total & DIGEST_MASK

    def get(self, symbol: str) -> SymbolValues | None:
        raw = self.native.get(symbol)
        return None if raw is None else _values(raw)

    def symbol_digest(self, symbol: str) -> int | None:
        return self.native.symbol_hash(symbol)

    def set_symbol(self, symbol: str, values: SymbolValues) -> None:
        self.native.set(symbol, values.astuple())

    def snapshot(self) -> dict[str, SymbolValues]:
        return {symbol: _values(raw) for symbol, raw in self.native.items()}

    def restore(self, snapshot: Mapping[str, SymbolValues], *, session: int | None = None) -> None:
        if session is not None:
            self.session = session
        self.native.clear()
        for symbol, values in snapshot.items():
            self.native.set(symbol, values.astuple())

    def __len__(self) -> int:
        return len(self.native)

    def __contains__(self, symbol: object) -> bool:
        return symbol in self.native

    def __repr__(self) -> str:
        return (
            f"<NativeConversionState [symbols={len(self.native)}, session={self._session}, "
            f"digest={self.native.digest:016x}]>"
        )


def unsupported_reason(table: ConverterTable) -> str | None:
    """Why the native engine cannot run ``table`` (``None``: it can)."""
    if _fastpath is None:
        return (
            "the C extension adapter.conversion._fastpath is not built "
            "(run `python setup.py build_ext --inplace`)"
        )
    try:
        compile_spec(table)
    except Unsupported as exc:
        return f"the converter table uses a feature the C fast path lacks ({exc})"
    return None


class NativeEngine(ConversionEngine):
    """:class:`~adapter.conversion.engine.ConversionEngine` whose runs are the C fast path.

    Args:
        table: a converter table :func:`compile_spec` accepts.

    Raises:
        Unsupported: the table uses a feature the C path lacks.
        RuntimeError: the extension is not built.
    """

    is_native = True

    def __init__(self, table: ConverterTable) -> None:
        state = NativeConversionState()
        super().__init__(table, state)
        assert _fastpath is not None  # NativeConversionState() raised otherwise
        self._run = _fastpath.FastPath(state.native, compile_spec(table)).run

    def run_function(self) -> RunFunction:
        """The C call itself (``FastPath.run``): no Python frame between the core and C."""
        return self._run

    def run(
        self,
        frame: bytes,
        pos: int,
        expect_seq: int,
        stop_seq: int,
        room: int,
        max_count: int,
        publish_time_ns: int,
        source_stream: int,
        publish: bool,
        want_payloads: bool,
        /,
    ) -> RunTuple:
        return self._run(
            frame,
            pos,
            expect_seq,
            stop_seq,
            room,
            max_count,
            publish_time_ns,
            source_stream,
            publish,
            want_payloads,
        )
