"""The careful path on deep books: staged sides, views of the C records, and patches.

``StagedSide`` is a list to the book rules: played against a plain list, operation by
operation, it must read the same after every one, and its ops played on the base give the
same side. ``BookTable.view`` / ``BookTable.patch`` must leave a record -- levels, digest,
level count -- exactly as ``BookTable.set`` of the same values would, refuse what does not
fit the record (changing nothing), and the careful path through them must publish and keep
what the Python reference does on books deep enough to be trees (past 64 levels a side),
with ``book_full`` on a full side. The work a careful message does on a deep book is
counted (tree nodes visited, records copied out), never timed.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedha.adapter.conversion import book as book_module
from feedha.adapter.conversion.book import BookValues
from feedha.adapter.conversion.staged_side import DELETE, INSERT, MAX_PIECES, SET, StagedSide
from feedha.adapter.formats.fix44.engine import Fix44Engine
from feedha.bench.micro_fix44 import UNKNOWN_TAG, book_full_messages, deep_book_messages
from feedha.proto import fix
from tests.unit.adapter.test_fix44_native_state import _same_after, play_both
from tests.unit.adapter.test_fix44_run import Played, convert, needs_native

Level = tuple[float, float, int]


def _levels(count: int, *, start: float = 1000.0) -> list[Level]:
    return [(start - k, float(k % 7), k % 3) for k in range(count)]


# An operation on a side: what the book rules do to a list, and reads between them.
_OP = st.one_of(
    st.tuples(st.just("insert"), st.integers(-3, 90), st.integers(0, 10**6)),
    st.tuples(st.just("set"), st.integers(-90, 90), st.integers(0, 10**6)),
    st.tuples(st.just("del"), st.integers(-90, 90), st.just(0)),
    st.tuples(st.just("del_from"), st.integers(0, 90), st.just(0)),
    st.tuples(st.just("del_range"), st.integers(0, 90), st.integers(0, 5)),
    st.tuples(st.just("read"), st.integers(-90, 90), st.integers(0, 90)),
)


def _apply(side: Any, op: tuple[str, int, int]) -> Any:
    """One operation on a list or a StagedSide: what it read, or the exception it raised."""
    kind, at, value = op
    level = (float(value), float(value % 13), value % 5)
    try:
        if kind == "insert":
            side.insert(at, level)
        elif kind == "set":
            side[at] = level
        elif kind == "del":
            del side[at]
        elif kind == "del_from":
            del side[at:]
        elif kind == "del_range":
            del side[at : at + value]
        else:
            return (side[at], side[at : at + value], side[:value], len(side), bool(side))
    except IndexError:
        return IndexError
    return None


def _replay(base: list[Level], ops: list[tuple[int, int, Any]]) -> list[Level]:
    """StagedSide.ops played on a list as BookTable.patch plays them."""
    out = list(base)
    for kind, at, value in ops:
        if kind == SET:
            out[at] = value
        elif kind == INSERT:
            out.insert(at, value)
        else:
            assert kind == DELETE
            del out[at:value]
    return out


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 80), st.lists(_OP, max_size=60))
def test_a_staged_side_is_a_list_to_the_book_rules_and_its_ops_replay_it(
    count: int, ops: list[tuple[str, int, int]]
) -> None:
    base = _levels(count)
    frozen = tuple(base)
    plain, staged = list(base), StagedSide(base)
    for op in ops:
        assert _apply(staged, op) == _apply(plain, op), op
        assert len(staged) == len(plain) and staged == plain and list(staged) == plain
    assert tuple(base) == frozen  # the base is never changed
    assert _replay(base, staged.ops) == plain
    assert staged[:] == plain and staged[::2] == plain[::2] and staged != [*plain, (0.0, 0.0, 0)]


def test_a_side_of_many_changes_reads_its_base_once_and_goes_on_as_a_list() -> None:
    base = _levels(500)
    staged, plain = StagedSide(base), list(base)
    for k in range(4 * MAX_PIECES):
        for side in (staged, plain):
            side[(7 * k) % 500] = (0.5, 1.0, k)
    assert staged == plain and _replay(base, staged.ops) == plain
    assert len(staged._pieces) <= MAX_PIECES  # compacted: one list (then changed in place)


# ---- the C records: view and patch ----


def _table(levels: list[Level], asks: list[Level] | None = None) -> Any:
    from feedha.adapter.conversion import _orders

    table = _orders.BookTable()
    table.set("S", (0, 0.0, 0.0, 0.0, 0.0, 0, 0.0, 0.0, 0.0), _fields(False, levels, asks or []))
    return table


def _fields(level_indexed: bool, bids: list[Level], asks: list[Level]) -> tuple[Any, ...]:
    return (level_indexed, bids, asks, 3.0, None, None, None, None, None, None, None, None, 0.0, 0.0, 0)


@needs_native
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([0, 5, 64, 65, 300]), st.lists(_OP, max_size=40), st.booleans(), st.booleans())
def test_a_patch_leaves_the_record_as_a_whole_set_would(
    count: int, ops: list[tuple[str, int, int]], was_indexed: bool, now_indexed: bool
) -> None:
    table = _table(_levels(count), _levels(3, start=2000.0))
    table.set("S", table.get("S")[:9], _fields(was_indexed, _levels(count), _levels(3, start=2000.0)))
    raw = table.view("S")
    staged = StagedSide(raw[9][1])
    for op in ops:
        if op[0] != "read":
            _apply(staged, op)
    expected = _replay(_levels(count), staged.ops)
    values = (1, 2.0, 2.0, 2.0, 2.0, 1, 9.0, 0.0, 0.0)
    table.patch("S", values, _fields(now_indexed, [], []), (staged.base, staged.ops), (raw[9][2], ()))
    whole = _table([])
    whole.set("S", values, _fields(now_indexed, expected, _levels(3, start=2000.0)))
    assert table.get("S") == whole.get("S")
    assert table.digest == whole.digest and table.symbol_hash("S") == whole.symbol_hash("S")
    assert table.levels == whole.levels == len(expected) + 3


@needs_native
def test_a_patch_that_does_not_fit_its_record_is_refused_and_changes_nothing() -> None:
    table = _table(_levels(100))
    view = table.view("S")[9][1]
    before, digest = table.get("S"), table.digest
    keep = (table.view("S")[9][2], [])
    values, head = before[:9], _fields(False, [], [])
    for sides, error in (
        (((view, [(INSERT, 101, (1.0, 1.0, 0))]), keep), IndexError),  # past the end
        (((view, [(DELETE, 5, 200)]), keep), IndexError),
        (((view, [(SET, 0, (1.0, 1.0))]), keep), TypeError),  # a level of two
        (((view, [(7, 0, 0)]), keep), ValueError),
        ((keep, keep), RuntimeError),  # the ask side's view as the bids
        ((view, (view, [])), TypeError),  # a bare view is not a side's levels
    ):
        with pytest.raises(error):
            table.patch("S", values, head, *sides)
        assert table.get("S") == before and table.digest == digest
    table.set("T", values, _fields(False, [], []))  # any change of the table: the views are stale
    assert view.stale
    with pytest.raises(RuntimeError):
        view[0]
    table.patch("S", values, head, (view, []), [])  # but S did not change: its ops still fit it
    assert table.get("S") == before and table.digest != digest  # T's share
    other = table.view("T")[9][1]
    with pytest.raises(RuntimeError):  # a view of another record
        table.patch("S", values, head, (other, []), [])
    table.set("S", values, _fields(False, _levels(3), []))
    with pytest.raises(RuntimeError):  # S changed since its view was made
        table.patch("S", values, head, (other, []), [])


# ---- the careful path on deep books ----


def _deep_stream(prices: int, count: int, seed: int) -> list[bytes]:
    """A book of ``prices`` a side, then Changes each carrying a tag the C run stops at."""
    messages, _warm = deep_book_messages(count, prices=prices, seed=seed, extra=UNKNOWN_TAG)
    return messages


def _x(seq: int, *entries: tuple[str, str, str, str]) -> bytes:
    body: list[tuple[int, Any]] = [(35, "X"), (49, "V"), (56, "F"), (34, seq), (52, "20260105-14:30:00")]
    body.append((268, len(entries)))
    for action, side, price, size in entries:
        body += [(279, action), (269, side), (55, "D"), (270, price)]
        body += [(271, size)] if size else []
        body += list(UNKNOWN_TAG)
    return fix.encode_message(body)


@needs_native
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    st.lists(
        st.lists(
            st.tuples(
                st.sampled_from("0012"),
                st.sampled_from("01"),
                st.integers(-200, 200).map(lambda k: f"{(10_000 + k) / 100:.2f}"),
                st.sampled_from(("1", "7", "0")),
            ),
            min_size=1,
            max_size=6,
        ),
        min_size=1,
        max_size=30,
    ),
    st.integers(1, 12),
)
def test_the_careful_path_on_deep_books_agrees_with_the_reference(
    changes: list[list[tuple[str, str, str, str]]], depth: int
) -> None:
    import feedha.adapter.formats.fix44.engine as fix44_engine

    with pytest.MonkeyPatch.context() as patch:  # a side fills up: book_full now and then
        patch.setattr(book_module, "MAX_PRICES", 150)
        patch.setattr(fix44_engine, "MAX_PRICES", 150)
        engines = [Fix44Engine(depth=depth, prefer_native=n) for n in (True, False)]
        opening = _deep_stream(140, 0, 1)  # 140 prices a side: trees, near full
        stream = opening + [_x(len(opening) + k + 1, *entries) for k, entries in enumerate(changes)]
        play_both(engines, stream)
    native, reference = engines
    _same_after(native, reference)
    assert native.state.level_count == reference.state.level_count


class _Counting:
    """A BookTable that counts the calls that copy a record out or in whole."""

    def __init__(self, table: Any) -> None:
        self.table, self.whole = table, 0

    def __getattr__(self, name: str) -> Any:
        if name in ("get", "set", "items"):
            self.whole += 1
        return getattr(self.table, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("table", "whole"):
            object.__setattr__(self, name, value)
        else:
            setattr(self.table, name, value)

    def __len__(self) -> int:
        return len(self.table)

    def __contains__(self, symbol: object) -> bool:
        return symbol in self.table


@needs_native
@pytest.mark.parametrize("prices", [10, 4_000])
def test_a_careful_message_on_a_deep_book_copies_nothing_and_walks_a_path(prices: int) -> None:
    messages, warm = deep_book_messages(60, prices=prices, extra=UNKNOWN_TAG)
    engine = Fix44Engine(depth=10)
    assert convert(engine, b"".join(messages[:warm]), Played()) == {}
    native = engine.state.native  # type: ignore[attr-defined]
    counting = _Counting(native)
    engine.state.native = counting  # type: ignore[attr-defined]
    steps, played = native.level_steps, Played()
    assert convert(engine, b"".join(messages[warm:]), played) == {}
    assert played.from_runs == 0 and len(played.digests) == 8 * 60  # every one by the careful path
    assert counting.whole == 0  # no record copied out or in whole
    assert (native.level_steps - steps) / 60 < 60 * 13  # tree nodes a message: a few paths of log2(n)


@needs_native
def test_a_book_full_flood_is_refused_without_copying_the_full_side() -> None:
    messages, warm = book_full_messages(40)
    engine = Fix44Engine(depth=10)
    assert convert(engine, b"".join(messages[:warm]), Played()) == {}
    counting = _Counting(engine.state.native)  # type: ignore[attr-defined]
    engine.state.native = counting  # type: ignore[attr-defined]
    played = Played()
    assert convert(engine, b"".join(messages[warm:]), played) == {"book_full": 40}
    assert counting.whole == 0 and played.digests == b""
    values = engine.state.get("F")
    assert values is not None and values.book is not None
    assert len(values.book.bids) == book_module.MAX_PRICES


def test_the_python_state_still_stages_on_list_copies() -> None:
    book = BookValues(False, _levels(5), [])
    staged = book.fork()
    levels = staged.writable(book_module.BID)
    assert type(levels) is list and levels is not book.bids  # the reference: a copy of the list


# ---- the journal's recovery: a block rolled into a deep book ----


@needs_native
@pytest.mark.parametrize("depth", [1, 10])
def test_blocks_rolled_through_views_keep_the_whole_books_as_the_reference_rolls_them(depth: int) -> None:
    from feedha.adapter.conversion.codec import roll_symbol
    from feedha.adapter.formats.fix44.engine import BookState
    from feedha.proto import market_pb2
    from tests.unit.adapter.test_fix44_levels import _convert, _roll

    messages, warm = deep_book_messages(150, prices=300, seed=depth)
    messages += [_x(len(messages) + k + 1, ("2", "0", f"{99.99 - k / 100:.2f}", "")) for k in range(20)]
    engine = Fix44Engine(depth=depth)
    reference, rolled = BookState(depth), Fix44Engine(depth=depth).state
    counting = _Counting(rolled.native)  # type: ignore[attr-defined]
    for seq, message in enumerate(messages, start=1):
        if seq == warm + 1:
            rolled.native = counting  # type: ignore[attr-defined]
        for payload in _convert(engine, message, seq):
            _roll(reference, payload)
            for update in market_pb2.MarketUpdate.FromString(payload).symbols:  # as recovery rolls
                rolled.commit({update.symbol: roll_symbol(rolled.view(update.symbol), update)})
    assert counting.whole == 0  # past the opening, no record copied out or in whole
    assert rolled.digest == reference.digest == engine.state.digest == rolled.recompute_digest()
    assert rolled.snapshot() == reference.snapshot() == engine.state.snapshot()
