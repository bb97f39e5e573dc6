"""The vectorized FIX encoder against proto.fix, byte for byte (pure numpy, no Spark)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.proto import fix
from feedha.spark_feed.encoder import FixEncoder, Quotes, digit_bytes, digit_count, width_of

SYMBOLS = ("A", "MS", "XOM", "AAPL", "ZZZZZZZZ")


def _cents(value: int) -> str:
    return f"{value // 100}.{value % 100:02d}"


def _reference(rows: Quotes, index: int, sender: str = "FEED") -> bytes:
    price, size = int(rows.price[index]), int(rows.size[index])
    if rows.is_trade[index]:
        entries = [fix.SourceEntry(fix.ENTRY_TRADE, _cents(price), size)]
    else:
        entries = [fix.SourceEntry(fix.ENTRY_BID, _cents(price), size),
                   fix.SourceEntry(fix.ENTRY_OFFER, _cents(int(rows.ask[index])), size)]  # fmt: skip
    symbol = SYMBOLS[int(rows.symbol[index])]
    return fix.encode_market_data(source_seq=int(rows.seq[index]), symbol=symbol,
                                  event_time_ns=int(rows.event_ns[index]), entries=entries,
                                  sender=sender)  # fmt: skip


def _rows(rng: np.random.Generator, count: int, high: int) -> Quotes:
    return Quotes(
        seq=rng.integers(0, high, count),
        symbol=rng.integers(0, len(SYMBOLS), count),
        event_ns=rng.integers(1_700_000_000 * 10**9, 1_700_000_300 * 10**9, count),
        is_trade=rng.random(count) < 0.4,
        price=rng.integers(0, high, count),
        size=rng.integers(0, high, count),
        ask=rng.integers(0, high, count),
    )


def _split(offsets: np.ndarray, data: np.ndarray) -> list[bytes]:
    raw = data.tobytes()
    return [raw[a:b] for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)]


@pytest.mark.parametrize("high", [1, 10, 1_000, 10**6, 10**12, 10**17])
def test_every_message_is_what_proto_fix_builds(high: int) -> None:
    rng = np.random.default_rng(high)
    rows = _rows(rng, 400, high)
    offsets, data = FixEncoder(SYMBOLS).encode(rows)
    messages = _split(offsets, data)
    assert messages == [_reference(rows, i) for i in range(len(rows))]
    bodies, malformed = fix.split_messages(data.tobytes())
    assert malformed == 0 and len(bodies) == len(rows)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 10**17), st.integers(0, 4), st.integers(0, 2**62), st.booleans(),
                  st.integers(0, 10**15), st.integers(0, 10**9), st.integers(0, 10**15)),
        min_size=1, max_size=30,
    ),
    st.sampled_from(["FEED", "X", "SENDER-WITH-A-LONGER-NAME"]),
)  # fmt: skip
def test_any_rows_match_the_reference(values: list[tuple[int, ...]], sender: str) -> None:
    columns = list(zip(*values, strict=True))
    rows = Quotes(seq=np.array(columns[0], dtype=np.int64), symbol=np.array(columns[1], dtype=np.int64),
                  event_ns=np.array(columns[2], dtype=np.int64), is_trade=np.array(columns[3], dtype=bool),
                  price=np.array(columns[4], dtype=np.int64), size=np.array(columns[5], dtype=np.int64),
                  ask=np.array(columns[6], dtype=np.int64))  # fmt: skip
    # Event times far apart need a chunk each (a chunk spans < MAX_SECONDS_SPAN seconds).
    encoder = FixEncoder(SYMBOLS, sender=sender)
    for index in range(len(rows)):
        one = Quotes(**{name: getattr(rows, name)[index : index + 1] for name in Quotes.__dataclass_fields__})
        offsets, data = encoder.encode(one)
        assert _split(offsets, data) == [_reference(rows, index, sender)]


def test_digit_helpers() -> None:
    values = np.array([0, 7, 42, 999, 1000, 123456789], dtype=np.int64)
    width = width_of(values)
    assert width == 9
    text = digit_bytes(values, width)
    assert [bytes(row).lstrip(b"\0").decode() for row in text] == [str(v) for v in values]
    assert list(digit_count(values, width)) == [1, 1, 2, 3, 4, 9]
    hidden = digit_bytes(values, width, present=np.array([True, False, True, False, True, False]))
    assert [bytes(row).lstrip(b"\0") for row in hidden] == [b"0", b"", b"42", b"", b"1000", b""]


def _quotes(count: int = 1, **columns: np.ndarray) -> Quotes:
    values = {name: np.ones(count, dtype=np.int64) for name in ("seq", "event_ns", "price", "size", "ask")}
    values |= {"symbol": np.zeros(count, dtype=np.int64), "is_trade": np.zeros(count, dtype=bool)}
    return Quotes(**(values | columns))


def test_empty_chunk_and_bad_input() -> None:
    encoder = FixEncoder(SYMBOLS)
    offsets, data = encoder.encode(_quotes(0))
    assert list(offsets) == [0] and len(data) == 0
    with pytest.raises(ValueError, match="0..10"):
        encoder.encode(_quotes(seq=np.array([-1])))
    with pytest.raises(ValueError, match="symbol index"):
        encoder.encode(_quotes(symbol=np.array([9])))
    with pytest.raises(ValueError, match="equal lengths"):
        encoder.encode(_quotes(seq=np.ones(2, np.int64)))
    with pytest.raises(ValueError, match="span"):
        encoder.encode(_quotes(2, event_ns=np.array([0, 10**17])))
    for bad in ("", "A=B", "A\x01", "Ä", "X" * 33):
        with pytest.raises(ValueError, match="not a FIX value"):
            FixEncoder([bad])
    with pytest.raises(ValueError, match="not a FIX value"):
        FixEncoder(SYMBOLS, sender="A B\x00")
    assert "symbols=5" in repr(encoder)
