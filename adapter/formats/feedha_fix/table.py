"""``feedha-fix``'s converter table: a declarative YAML map from source FIX tags to model fields.

Theory of operation
-------------------
The table says, for every field of the application message model that comes
from the source, which FIX tag carries it and which *converter function*
turns the tag's text into the field's value (``to_int``, ``to_double``,
``to_str``, ``to_timestamp_ns``), optionally scaled (``scale: 0.0001`` for a
price sent in 1/10000 units). Renaming is implicit: the key is the target
field, ``tag`` the source. Derived values (an entry's ``notional``, the named
``extra`` values of a message such as ``mid``) are built from a small fixed
set of operations named in the YAML (:data:`OPERATIONS`); nothing is ever
evaluated as code.

:meth:`ConverterTable.load` checks everything once and raises
:class:`~adapter.errors.ConfigError` naming the key and the value, so the hot
path (the parser and the C fast path beside it) can trust the table. This module is pure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

import yaml

from feedha.adapter.errors import ConfigError
from feedha.proto import market_pb2
from feedha.proto.fix import parse_timestamp

DEFAULT_TABLE_RESOURCE: Final = "converters.yaml"
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1


# --- converter functions: bytes -> value; ValueError on bad input ----------------


def to_int(raw: bytes) -> int:
    """Convert a decimal integer field (widened to a Python int, checked against int64).

    Raises:
        ValueError: not a plain decimal integer, or outside int64.
    """
    digits = raw[1:] if raw[:1] == b"-" else raw
    if not digits.isdigit():
        raise ValueError(f"not an integer: {raw!r}")
    value = int(raw)
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"integer out of int64 range: {raw!r}")
    return value


def to_double(raw: bytes) -> float:
    """Convert a decimal text number (``"101.25"``) to a finite double.

    Raises:
        ValueError: not a number, or NaN/infinite.
    """
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {raw!r}")
    return value


def to_str(raw: bytes) -> str:
    """Convert a non-empty UTF-8 text field.

    Raises:
        ValueError: empty or not UTF-8.
    """
    if not raw:
        raise ValueError("empty text")
    return raw.decode()


def to_timestamp_ns(raw: bytes) -> int:
    """Convert a FIX UTC timestamp (``YYYYMMDD-HH:MM:SS.fff...``) to ns since the epoch.

    Raises:
        ValueError: not a timestamp (:class:`proto.fix.FixError` is a ValueError).
    """
    return parse_timestamp(raw)


CONVERTERS: Final[Mapping[str, Callable[[bytes], Any]]] = {
    "to_int": to_int,
    "to_double": to_double,
    "to_str": to_str,
    "to_timestamp_ns": to_timestamp_ns,
}

# target field -> (allowed converters, kind of scale allowed: "int", "float" or None)
_FIELD_RULES: Final[Mapping[str, tuple[frozenset[str], str | None]]] = {
    "source_seq": (frozenset({"to_int"}), None),
    "symbol": (frozenset({"to_str"}), None),
    "event_time_ns": (frozenset({"to_timestamp_ns", "to_int"}), "int"),
    "price": (frozenset({"to_double", "to_int"}), "float"),
    "size": (frozenset({"to_int"}), "int"),
}
_HEADER_FIELDS: Final = ("source_seq", "symbol", "event_time_ns")
_ENTRY_FIELDS: Final = ("price", "size")
_ENTRY_DERIVED: Final = ("notional",)
# Names an extra may use besides constants and earlier extras (see adapter.conversion).
EXTRA_INPUTS: Final = frozenset({"bid", "ask", "trade_price", "trade_size", "trade_notional"})


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _div(values: Sequence[float]) -> float:
    return values[0] / values[1]  # ZeroDivisionError is handled by the caller


# op -> (function over the argument values, minimum arity, maximum arity or None)
OPERATIONS: Final[Mapping[str, tuple[Callable[[Sequence[float]], float], int, int | None]]] = {
    "add": (math.fsum, 2, None),
    "sub": (lambda v: v[0] - v[1], 2, 2),
    "mul": (math.prod, 2, None),
    "div": (_div, 2, 2),
    "mean": (_mean, 1, None),
    "min": (min, 1, None),
    "max": (max, 1, None),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldRule:
    """One source field: FIX tag -> converter function -> optional scale -> target field."""

    target: str
    tag: int
    convert: str
    scale: float | int | None = None

    @property
    def tag_bytes(self) -> bytes:
        """The tag as it appears on the wire (``b"270"``)."""
        return str(self.tag).encode()


@dataclass(frozen=True, slots=True, kw_only=True)
class DerivedRule:
    """A derived value: ``op`` over ``args`` (names or constants).

    Attributes:
        types: for entry fields, the entry types it applies to (others get 0);
            ``None`` means all.
    """

    target: str
    op: str
    args: tuple[str | float, ...]
    types: frozenset[int] | None = None

    def compile(self) -> Callable[[Mapping[str, float]], float | None]:
        """Return an equivalent of :meth:`evaluate` specialized for two named arguments (the hot case)."""
        function = OPERATIONS[self.op][0]
        if len(self.args) != 2 or not all(isinstance(arg, str) for arg in self.args):
            return self.evaluate
        first, second = str(self.args[0]), str(self.args[1])

        def evaluate_pair(env: Mapping[str, float]) -> float | None:
            a = env.get(first)
            b = env.get(second)
            if a is None or b is None:
                return None
            try:
                return function((a, b))
            except ZeroDivisionError:
                return None
            except OverflowError:  # fsum's intermediate overflow: the value is not finite
                return math.inf

        return evaluate_pair

    def evaluate(self, env: Mapping[str, float]) -> float | None:
        """Compute the value from named inputs; ``None`` when an input is absent or it divides by 0.

        A value past the doubles' range is infinite (``math.fsum`` raises where ``+`` would give
        ``inf``: it is given as ``inf`` all the same), which its reader refuses as ``overflow``.
        """
        values: list[float] = []
        for arg in self.args:
            if isinstance(arg, str):
                value = env.get(arg)
                if value is None:
                    return None
                values.append(value)
            else:
                values.append(arg)
        try:
            return OPERATIONS[self.op][0](values)
        except ZeroDivisionError:
            return None
        except OverflowError:
            return math.inf


@dataclass(frozen=True, slots=True, kw_only=True)
class ConverterTable:
    """A checked converter table. Build it with :meth:`load` or :meth:`from_mapping`.

    Attributes:
        message_type: the value tag 35 must carry.
        header: rules for ``source_seq``, ``symbol`` and ``event_time_ns``.
        count_tag: the tag giving the number of entries (268).
        start_tag: the tag that opens every entry (279).
        type_tag: the entry type tag (269).
        entry_types: wire value of ``type_tag`` -> ``market_pb2.EntryType`` value.
        entry_fields: rules for ``price`` and ``size``.
        notional: how an entry's notional is derived (``None``: always 0).
        extra: named derived values of a message, in order.
    """

    message_type: str
    header: Mapping[str, FieldRule]
    count_tag: int
    start_tag: int
    type_tag: int
    entry_types: Mapping[bytes, int]
    entry_fields: Mapping[str, FieldRule]
    notional: DerivedRule | None
    extra: tuple[DerivedRule, ...]

    @classmethod
    def load(cls, path: Path | None = None) -> ConverterTable:
        """Load and check a YAML table.

        Args:
            path: the YAML file; ``None`` loads the packaged ``adapter/formats/feedha_fix/converters.yaml``.

        Returns:
            The checked table.

        Raises:
            ConfigError: unreadable YAML or a bad key/value (the message names both).
        """
        if path is None:
            text = (
                resources.files("feedha.adapter.formats.feedha_fix")
                .joinpath(DEFAULT_TABLE_RESOURCE)
                .read_text("utf-8")
            )
            source = f"adapter/formats/feedha_fix/{DEFAULT_TABLE_RESOURCE}"
        else:
            try:
                text = Path(path).read_text("utf-8")
            except OSError as exc:
                raise ConfigError(f"converter table {path}: cannot read: {exc}") from exc
            source = str(path)
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"converter table {source}: bad YAML: {exc}") from exc
        return cls.from_mapping(data, source=source)

    @classmethod
    def from_mapping(cls, data: object, *, source: str = "<mapping>") -> ConverterTable:
        """Check a parsed table (the YAML document as Python objects).

        Raises:
            ConfigError: a missing, unknown or bad key; the message names the key and value.
        """
        return _TableParser(source).parse(data)


class _TableParser:
    # Strategy: walk the document once, naming every key by its dotted path, so
    # an operator sees e.g. "entries.fields.price.scale: bad value -1".

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, value: object, why: str) -> ConfigError:
        return ConfigError(f"converter table {self.source}: {key}: bad value {value!r} ({why})")

    def mapping(
        self, data: object, key: str, allowed: Sequence[str], required: Sequence[str]
    ) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise self.fail(key or "<top>", data, "expected a mapping")
        for name in data:
            if name not in allowed:
                raise self.fail(
                    f"{key}.{name}".lstrip("."), data[name], f"unknown key; allowed: {list(allowed)}"
                )
        for name in required:
            if name not in data:
                raise self.fail(f"{key}.{name}".lstrip("."), None, "missing")
        return data

    def tag(self, value: object, key: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 100_000:
            raise self.fail(key, value, "expected a FIX tag number 1..99999")
        return value

    def parse(self, data: object) -> ConverterTable:
        top = self.mapping(
            data,
            "",
            ("version", "message_type", "header", "entries", "extra"),
            ("version", "message_type", "header", "entries"),
        )
        if top["version"] != 1:
            raise self.fail("version", top["version"], "only version 1 is known")
        message_type = top["message_type"]
        if not isinstance(message_type, str) or not message_type or "\x01" in message_type:
            raise self.fail("message_type", message_type, "expected a non-empty string")
        header_data = self.mapping(top["header"], "header", _HEADER_FIELDS, _HEADER_FIELDS)
        header = {name: self.field(name, header_data[name], f"header.{name}") for name in _HEADER_FIELDS}
        entries = self.mapping(
            top["entries"],
            "entries",
            ("count_tag", "start_tag", "type_tag", "types", "fields", "derived"),
            ("count_tag", "start_tag", "type_tag", "types", "fields"),
        )
        types = self.entry_types(entries["types"])
        fields_data = self.mapping(entries["fields"], "entries.fields", _ENTRY_FIELDS, _ENTRY_FIELDS)
        fields = {
            name: self.field(name, fields_data[name], f"entries.fields.{name}") for name in _ENTRY_FIELDS
        }
        derived = self.mapping(entries.get("derived", {}) or {}, "entries.derived", _ENTRY_DERIVED, ())
        notional = None
        if "notional" in derived:
            notional = self.derived(
                "notional", derived["notional"], "entries.derived.notional", frozenset(_ENTRY_FIELDS), True
            )
        tags = {
            "entries.count_tag": self.tag(entries["count_tag"], "entries.count_tag"),
            "entries.start_tag": self.tag(entries["start_tag"], "entries.start_tag"),
            "entries.type_tag": self.tag(entries["type_tag"], "entries.type_tag"),
        }
        tags.update({f"header.{n}.tag": r.tag for n, r in header.items()})
        tags.update({f"entries.fields.{n}.tag": r.tag for n, r in fields.items()})
        tags["message_type"] = 35
        seen: dict[int, str] = {}
        for key, tag in tags.items():
            if tag in seen:
                raise self.fail(key, tag, f"tag already used by {seen[tag]}")
            seen[tag] = key
        return ConverterTable(
            message_type=message_type,
            header=header,
            count_tag=tags["entries.count_tag"],
            start_tag=tags["entries.start_tag"],
            type_tag=tags["entries.type_tag"],
            entry_types=types,
            entry_fields=fields,
            notional=notional,
            extra=self.extras(top.get("extra") or {}),
        )

    def field(self, name: str, data: object, key: str) -> FieldRule:
        spec = self.mapping(data, key, ("tag", "convert", "scale"), ("tag", "convert"))
        allowed, scale_kind = _FIELD_RULES[name]
        convert = spec["convert"]
        if convert not in CONVERTERS:
            raise self.fail(f"{key}.convert", convert, f"unknown converter; known: {sorted(CONVERTERS)}")
        if convert not in allowed:
            raise self.fail(f"{key}.convert", convert, f"{name} takes one of {sorted(allowed)}")
        scale = spec.get("scale")
        if scale is not None:
            if scale_kind is None:
                raise self.fail(f"{key}.scale", scale, f"{name} cannot be scaled")
            is_number = isinstance(scale, int | float) and not isinstance(scale, bool)
            if not is_number or not math.isfinite(scale) or scale <= 0:
                raise self.fail(f"{key}.scale", scale, "expected a positive finite number")
            if scale_kind == "int" and not isinstance(scale, int):
                raise self.fail(
                    f"{key}.scale", scale, f"{name} is an integer field: scale must be an integer"
                )
        return FieldRule(target=name, tag=self.tag(spec["tag"], f"{key}.tag"), convert=convert, scale=scale)

    def entry_types(self, data: object) -> dict[bytes, int]:
        if not isinstance(data, dict):
            raise self.fail("entries.types", data, "expected a mapping of wire value -> EntryType name")
        types: dict[object, object] = data
        result: dict[bytes, int] = {}
        for wire, name in types.items():
            key = f"entries.types.{wire}"
            if not isinstance(wire, str) or not wire or "\x01" in wire:
                raise self.fail(key, wire, "wire values must be quoted non-empty strings")
            if not isinstance(name, str) or name not in market_pb2.EntryType.keys():
                raise self.fail(key, name, f"expected one of {list(market_pb2.EntryType.keys())[1:]}")
            if name == "ENTRY_TYPE_UNSPECIFIED":
                raise self.fail(key, name, "cannot map to ENTRY_TYPE_UNSPECIFIED")
            result[wire.encode()] = market_pb2.EntryType.Value(name)
        if not result:
            raise self.fail("entries.types", data, "expected at least one entry type")
        return result

    def derived(
        self, target: str, data: object, key: str, inputs: frozenset[str], with_types: bool
    ) -> DerivedRule:
        allowed = ("op", "args", "types") if with_types else ("op", "args")
        spec = self.mapping(data, key, allowed, ("op", "args"))
        op = spec["op"]
        if op not in OPERATIONS:
            raise self.fail(f"{key}.op", op, f"unknown operation; known: {sorted(OPERATIONS)}")
        args = spec["args"]
        _function, low, high = OPERATIONS[op]
        if not isinstance(args, list) or len(args) < low or (high is not None and len(args) > high):
            arity = f"{low}" if high == low else f"{low}..{high or 'n'}"
            raise self.fail(f"{key}.args", args, f"{op} takes a list of {arity} arguments")
        for arg in args:
            if isinstance(arg, str):
                if arg not in inputs:
                    raise self.fail(f"{key}.args", arg, f"unknown name; known: {sorted(inputs)}")
            elif isinstance(arg, bool) or not isinstance(arg, int | float) or not math.isfinite(arg):
                raise self.fail(f"{key}.args", arg, "expected a name or a finite number")
        types = None
        if spec.get("types") is not None:
            names = spec["types"]
            known = market_pb2.EntryType.keys()
            if not isinstance(names, list) or not names or any(n not in known for n in names):
                raise self.fail(f"{key}.types", names, f"expected a list of {list(known)[1:]}")
            types = frozenset(market_pb2.EntryType.Value(n) for n in names)
        return DerivedRule(target=target, op=op, args=tuple(args), types=types)

    def extras(self, data: object) -> tuple[DerivedRule, ...]:
        if not isinstance(data, dict):
            raise self.fail("extra", data, "expected a mapping of name -> {op, args}")
        rules: list[DerivedRule] = []
        inputs = set(EXTRA_INPUTS)
        for name, spec in data.items():
            key = f"extra.{name}"
            if not isinstance(name, str) or not name.isidentifier() or name in EXTRA_INPUTS:
                raise self.fail(key, name, "extra names are identifiers other than the input names")
            rules.append(self.derived(name, spec, key, frozenset(inputs), False))
            inputs.add(name)
        return tuple(rules)
