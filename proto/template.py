"""A message layout as data: literal bytes around named slots.

:mod:`proto.fix` writes the source format's messages down once as
:class:`Template` values; every encoder of that format is built from them,
so each layout exists once. Pure: no I/O.
"""

from __future__ import annotations

import string
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Template"]


@dataclass(frozen=True, slots=True)
class Template:
    """A message layout: literal bytes around named slots, ``literals[i]`` before ``slots[i]``.

    Written as text with ``|`` for SOH and ``{name}`` for a slot
    (:meth:`parse`); there is one more literal than slots (the last may be
    empty). A fast encoder reads :meth:`pieces` and writes the literals as
    they are; :meth:`fill` is the plain way.

    Attributes:
        literals: the bytes around the slots.
        slots: the slot names, in order.
    """

    literals: tuple[bytes, ...]
    slots: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> Template:
        """``"8=FIX.4.4|9={body_length}|"`` -> a template (``|`` is SOH, ``{name}`` a slot).

        Raises:
            ValueError: a brace that does not make a slot, or a slot name used twice.
        """
        literals: list[bytes] = []
        slots: list[str] = []
        for literal, name, spec, conversion in string.Formatter().parse(text):
            literals.append(literal.replace("|", "\x01").encode("ascii"))
            if name is not None:
                if not name.isidentifier() or spec or conversion or name in slots:
                    raise ValueError(f"bad slot {name!r} in template {text!r}")
                slots.append(name)
        if len(literals) == len(slots):
            literals.append(b"")
        return cls(tuple(literals), tuple(slots))

    def pieces(self) -> Iterator[tuple[bytes, str | None]]:
        """``(literal, slot)`` in order; the last slot is ``None``."""
        return zip(self.literals, (*self.slots, None), strict=True)

    def substitute(self, **parts: bytes | Template) -> Template:
        """The template with some slots filled: by bytes, or by a template whose slots it takes over.

        Raises:
            KeyError: a name that is not a slot.
        """
        unknown = set(parts) - set(self.slots)
        if unknown:
            raise KeyError(f"not slots of this template: {sorted(unknown)}")
        literals: list[bytes] = [b""]
        slots: list[str] = []
        for literal, slot in self.pieces():
            literals[-1] += literal
            part = parts.get(slot) if slot is not None else None
            if isinstance(part, Template):
                literals[-1] += part.literals[0]
                literals += part.literals[1:]
                slots += part.slots
            elif part is not None:
                literals[-1] += part
            elif slot is not None:
                slots.append(slot)
                literals.append(b"")
        return Template(tuple(literals), tuple(slots))

    def fill(self, **values: bytes) -> bytes:
        """The bytes with every slot filled.

        Raises:
            KeyError: a slot without a value, or a value for no slot.
        """
        if set(values) != set(self.slots):
            raise KeyError(f"slots {list(self.slots)} need exactly their values, got {sorted(values)}")
        return b"".join(literal + (values[slot] if slot else b"") for literal, slot in self.pieces())

    def printf(self, **specs: bytes) -> bytes:
        """A ``%``-format string of the template: each slot becomes its spec (``%s`` by default).

        The literals' own ``%`` are escaped; the specs are used as given
        (``printf(seq=b"%d")``, or a whole %-format of a nested part).
        """
        return b"".join(
            literal.replace(b"%", b"%%") + (specs.get(slot, b"%s") if slot else b"")
            for literal, slot in self.pieces()
        )
