"""Whether ``fix44``'s state and runs are C: chosen as all native code is (:mod:`adapter._native_code`)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from feedha.adapter._native_code import warn_fallback
from feedha.adapter.conversion import choice
from feedha.adapter.formats.fix44.dictionary import Dictionary

if TYPE_CHECKING:
    from feedha.adapter.formats.fix44._native_books import NativeBookState

logger = logging.getLogger(__name__)

__all__ = ["fix44_native", "fix44_rules"]

Rules = tuple[tuple[tuple[int, str, str | None], ...], tuple[tuple[str, int, str], ...]]
# What the C run reads of a field itself: its tag and type (a dictionary that types one otherwise
# is not the C run's). 48 and 22 name a security through the engine's table (Fix44Run's securities).
_READ: Final = {34: "seqnum", 52: "timestamp", 60: "timestamp", 55: "string", 48: "string", 22: "string",
                269: "char", 279: "char", 270: "price", 271: "qty", 1023: "int", 346: "int"}  # fmt: skip
_DELIMITERS: Final = {"X": 279, "W": 269}
# The fields an entry type needs (New and Change), as the C run checks them (fx_entry_done).
_NEEDS: Final = {"0": (270, 271), "1": (270, 271), "2": (270, 271), **dict.fromkeys("45678", (270,)),
                 "B": (271,), "C": (271,)}  # fmt: skip


def fix44_native(*, prefer_native: bool = True) -> tuple[type[NativeBookState], Callable[..., Any]] | None:
    """``fix44``'s state in C and its C run, or ``None``: Python's state and runs.

    The state is :class:`~adapter.formats.fix44._native_books.NativeBookState` (the books in
    C structs, ``_orders.BookTable``); ``run_type(state.native, MAX_PRICES)`` is the C run of
    ``fix44``'s ``35=X`` and ``35=W`` over it (``_orders.Fix44Run`` with the packaged
    dictionary's :func:`fix44_rules`), whose ``run`` is a
    :data:`~adapter.conversion.engine.RunFunction`. Without the extension the engine keeps
    :class:`~adapter.formats.fix44.book_state.BookState` and runs the Python loop (logged once).

    Args:
        prefer_native: ``False`` gives ``None`` (tests, comparisons).
    """
    if not prefer_native:
        return None
    if choice.ORDERS_NOT_BUILT is not None:
        _warn_fix44_fallback()
        return None
    from feedha.adapter.conversion import _orders
    from feedha.adapter.formats.fix44._native_books import NativeBookState

    rules = _packaged_rules()
    assert rules is not None, "the packaged dictionary is the C run's"  # tests/unit/adapter/test_fix44_run.py
    run_type: Callable[..., Any] = functools.partial(_orders.Fix44Run, rules=rules)
    return NativeBookState, run_type


@functools.cache
def _packaged_rules() -> Rules | None:
    return fix44_rules(Dictionary.load())


def fix44_rules(dictionary: Dictionary) -> Rules | None:
    """The dictionary as ``Fix44Run`` reads it, or ``None`` where the C run cannot follow it.

    ``(fields, roles)``: every field as ``(tag, type, values)`` (a char field's one-character
    values as one string, ``None``: any) and, for ``35=X`` and ``35=W``, each tag's role:
    ``head`` (a header or body field: before the group, once) or ``entry`` (a field of the
    group's entries; ``stop``, which the run also takes, makes it stop at the tag). A tag with
    no role is skipped, as the parser skips it. ``None`` when the dictionary differs from
    what the run reads itself: another type for a tag it reads (:data:`_READ`), another group
    count or delimiter, other required tags or entry needs, a tag both in the body and the group.
    """
    fields = tuple(
        (tag, spec.type, None if spec.values is None else "".join(sorted(_one_char(spec.values))))
        for tag, spec in dictionary.fields.items()
    )
    types = {tag: spec.type for tag, spec in dictionary.fields.items()}
    if any(types.get(tag) != kind for tag, kind in _READ.items()) or dictionary.header_required != (34,):
        return None
    if {kind: dictionary.entry_needs.get(kind, ()) for kind in _NEEDS} != _NEEDS:
        return None
    roles: list[tuple[str, int, str]] = []
    for kind, delimiter in _DELIMITERS.items():
        spec = dictionary.messages.get(kind)
        if spec is None or spec.required or spec.group.count != 268 or spec.group.delimiter != delimiter:
            return None
        head, group = dictionary.header_fields | spec.fields, spec.group.fields
        if head & group or not set(spec.group.required) <= {279, 269} or 268 in head:
            return None
        roles += [(kind, tag, "head") for tag in sorted(head)]
        roles += [(kind, tag, "entry") for tag in sorted(group)]
    return fields, tuple(roles)


def _one_char(values: frozenset[str]) -> list[str]:
    # A char field's value is one byte: a longer value can never be given; printable ASCII only.
    return [value for value in values if len(value) == 1 and " " <= value <= "~"]


@functools.cache
def _warn_fix44_fallback() -> None:
    warn_fallback(logger, "the fix44 run", "~10x slower per message", str(choice.ORDERS_NOT_BUILT))
