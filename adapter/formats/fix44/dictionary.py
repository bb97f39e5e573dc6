"""The ``fix44`` data dictionary: which fields, groups, required tags, types and values a message may have.

:meth:`Dictionary.load` reads ``dictionaries/fix44.yaml`` (or a file an
operator names), checks it once and raises
:class:`~adapter.errors.ConfigError` naming the key, so the parser
(:mod:`adapter.formats.fix44.parser`) can trust it. The value checks
(:data:`TYPE_CHECKS`) are plain functions of the field's bytes. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

import yaml

from feedha.adapter.errors import ConfigError
from feedha.proto.fix import parse_timestamp

__all__ = ["TYPE_CHECKS", "Dictionary", "FieldSpec", "GroupSpec", "MessageSpec", "decimal_value"]

DEFAULT_RESOURCE: Final = "dictionaries/fix44.yaml"
_DECIMAL: Final = re.compile(rb"-?(?:\d+(?:\.\d*)?|\.\d+)")
_INT: Final = re.compile(rb"-?\d+")
_TIME: Final = re.compile(rb"\d\d:\d\d:\d\d(?:\.\d{1,9})?")
_DATE: Final = re.compile(rb"\d{8}")
MAX_NUMBER_TEXT: Final = 40  # longer decimal text is refused (a hostile feed's megabyte of digits)


def decimal_value(raw: bytes) -> float:
    """A FIX decimal (``Price``, ``Qty``): optional sign, digits, optional point; the nearest double.

    Raises:
        ValueError: anything else (exponents, ``nan``, ``inf``, blanks, over-long text).
    """
    if len(raw) > MAX_NUMBER_TEXT or not _DECIMAL.fullmatch(raw):
        raise ValueError(f"not a decimal: {raw[:24]!r}")
    return float(raw)


def _int_value(raw: bytes) -> int:
    if len(raw) > 19 or not _INT.fullmatch(raw):
        raise ValueError(f"not an integer: {raw[:24]!r}")
    return int(raw)


def _seqnum(raw: bytes) -> int:
    if not raw.isdigit() or raw[:1] == b"0" or len(raw) > 19:
        raise ValueError(f"not a sequence number: {raw[:24]!r}")
    return int(raw)


def _string(raw: bytes) -> str:
    if not raw:
        raise ValueError("empty text")
    return raw.decode()


def _checked(pattern: re.Pattern[bytes], what: str) -> Callable[[bytes], bytes]:
    def check(raw: bytes) -> bytes:
        if not pattern.fullmatch(raw):
            raise ValueError(f"not a {what}: {raw[:24]!r}")
        return raw

    return check


# type name -> bytes -> value (raises ValueError)
TYPE_CHECKS: Final[Mapping[str, Callable[[bytes], Any]]] = {
    "int": _int_value,
    "seqnum": _seqnum,
    "price": decimal_value,
    "qty": decimal_value,
    "char": lambda raw: _string(raw) if len(raw) == 1 else _string(b""),
    "string": _string,
    "timestamp": parse_timestamp,
    "time": _checked(_TIME, "UTCTimeOnly"),
    "date": _checked(_DATE, "date"),
}


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field: its tag, name, type and (for a ``char``) the values allowed."""

    tag: int
    name: str
    type: str
    values: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """A repeating group: its count tag, the tag that opens each entry, its fields and required ones."""

    count: int
    delimiter: int
    fields: frozenset[int]
    required: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MessageSpec:
    """A market-data message: its body fields, required ones and its entry group."""

    msg_type: str
    name: str
    fields: frozenset[int]
    required: tuple[int, ...]
    group: GroupSpec


@dataclass(frozen=True, slots=True)
class Dictionary:
    """The checked dictionary (see the module docstring)."""

    name: str
    fields: Mapping[int, FieldSpec]
    header_fields: frozenset[int]
    header_required: tuple[int, ...]
    messages: Mapping[str, MessageSpec]
    entry_needs: Mapping[str, tuple[int, ...]]
    session_messages: frozenset[str]

    @classmethod
    def load(cls, path: Path | None = None) -> Dictionary:
        """Read and check a dictionary (``None``: the packaged ``fix44.yaml``).

        Raises:
            ConfigError: naming the key that is wrong.
        """
        if path is None:
            text = resources.files("feedha.adapter.formats.fix44").joinpath(DEFAULT_RESOURCE).read_text()
        else:
            try:
                text = path.read_text()
            except OSError as exc:
                raise ConfigError(f"cannot read data dictionary {path}: {exc}") from exc
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"data dictionary is not YAML: {exc}") from exc
        return _build(raw)


def _build(raw: Any) -> Dictionary:
    if not isinstance(raw, dict) or raw.get("version") != 1:
        raise ConfigError("data dictionary: version must be 1")
    fields = {int(tag): _field(int(tag), spec) for tag, spec in _mapping(raw, "fields").items()}
    header = _mapping(raw, "header")
    messages = {
        str(msg_type): _message(str(msg_type), spec, fields)
        for msg_type, spec in _mapping(raw, "messages").items()
    }
    needs = {
        str(kind): tuple(_tags(spec.get("needs", []), fields, f"entry_types.{kind}.needs"))
        for kind, spec in _mapping(raw, "entry_types").items()
    }
    return Dictionary(
        name=str(raw.get("name", "fix44")),
        fields=fields,
        header_fields=frozenset(_tags(header.get("fields", []), fields, "header.fields")),
        header_required=tuple(_tags(header.get("required", []), fields, "header.required")),
        messages=messages,
        entry_needs=needs,
        session_messages=frozenset(str(v) for v in raw.get("session_messages", [])),
    )


def _mapping(raw: Mapping[str, Any], key: str) -> Mapping[Any, Any]:
    value = raw.get(key)
    if not isinstance(value, dict):
        raise ConfigError(f"data dictionary: {key} must be a mapping")
    return value


def _field(tag: int, spec: Any) -> FieldSpec:
    if not isinstance(spec, dict) or spec.get("type") not in TYPE_CHECKS:
        raise ConfigError(f"data dictionary: fields.{tag}.type must be one of {sorted(TYPE_CHECKS)}")
    values = spec.get("values")
    allowed = None if values is None else frozenset(str(v) for v in values)
    return FieldSpec(tag, str(spec.get("name", tag)), str(spec["type"]), allowed)


def _tags(values: Any, fields: Mapping[int, FieldSpec], where: str) -> list[int]:
    if not isinstance(values, list):
        raise ConfigError(f"data dictionary: {where} must be a list of tags")
    tags = [int(v) for v in values]
    unknown = [tag for tag in tags if tag not in fields]
    if unknown:
        raise ConfigError(f"data dictionary: {where} names undefined tags {unknown}")
    return tags


def _message(msg_type: str, spec: Any, fields: Mapping[int, FieldSpec]) -> MessageSpec:
    where = f"messages.{msg_type}"
    if not isinstance(spec, dict) or not isinstance(spec.get("group"), dict):
        raise ConfigError(f"data dictionary: {where}.group must be a mapping")
    group = spec["group"]
    group_fields = frozenset(_tags(group.get("fields", []), fields, f"{where}.group.fields"))
    delimiter = int(group.get("delimiter", 0))
    if delimiter not in group_fields:
        raise ConfigError(f"data dictionary: {where}.group.delimiter must be one of its fields")
    return MessageSpec(
        msg_type=msg_type,
        name=str(spec.get("name", msg_type)),
        fields=frozenset(_tags(spec.get("fields", []), fields, f"{where}.fields")),
        required=tuple(_tags(spec.get("required", []), fields, f"{where}.required")),
        group=GroupSpec(
            count=_tags([group.get("count")], fields, f"{where}.group.count")[0],
            delimiter=delimiter,
            fields=group_fields,
            required=tuple(_tags(group.get("required", []), fields, f"{where}.group.required")),
        ),
    )
