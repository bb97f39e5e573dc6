"""Type stubs for the C extension adapter/conversion/_orders.c."""

from collections.abc import Iterable, Iterator
from typing import Any, Final

# The constants shared with Python (_conversion_constants.h, scripts/gen_constants.py).
BLOCK_OVERHEAD: Final[int]
BLOCK_LENGTH_COVERS: Final[int]
MAX_PAYLOAD: Final[int]
MAX_SOURCE_SEQ: Final[int]
STOP_END: Final[int]
STOP_SLOW: Final[int]
STOP_ROOM: Final[int]
STOP_COUNT: Final[int]
# fix44's (_orders_constants.h, from adapter/conversion/book.py).
FX_NEW: Final[int]
FX_CHANGE: Final[int]
FX_DELETE: Final[int]
FX_TYPES: Final[str]

def encode_block(
    event_time_ns: int, publish_time_ns: int, depth: int, symbols: Iterable[tuple[str, Any, Any, Any, bytes]]
) -> bytes: ...
def symbol_digest(symbol: str, values: Any) -> int: ...
def order_hash(ref: int, symbol_hash: int, side: int, price: int, shares: int) -> int: ...
def siphash13(key: bytes, data: bytes, /) -> int: ...

class OrderTable:
    probes: Final[int]
    def __init__(self) -> None: ...
    def __len__(self) -> int: ...
    def __contains__(self, ref: object) -> bool: ...
    def get(self, ref: int) -> tuple[int, int, int, int] | None: ...
    def add(self, ref: int, symbol: int, side: int, price: int, shares: int) -> None: ...
    def set_shares(self, ref: int, shares: int) -> None: ...
    def remove(self, ref: int) -> None: ...
    def clear(self) -> None: ...
    def items(self) -> Iterator[tuple[int, int, int, int, int]]: ...

class SideLevels:
    sign: int
    steps: Final[int]
    height: Final[int]
    def __init__(self, *, is_bid: bool) -> None: ...
    def __len__(self) -> int: ...
    def move(self, price: int, shares: int, orders: int) -> None: ...
    def best(
        self, depth: int, moves: dict[int, tuple[int, int]] | None = None
    ) -> list[tuple[int, int, int]]: ...

class MboRun:
    def __init__(self, state: Any, values_type: Any, book_type: Any) -> None: ...
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
    ) -> tuple[int, int, int, bytes, int, bytes, list[bytes] | None]: ...
    def records(self, packet: bytes, /) -> tuple[bytes, int, int] | None: ...
    def checkpoint_symbols(self) -> bytes: ...

# A BookTable record: SymbolValues.astuple()'s nine, then BookValues' first 15 fields or None.
Record = tuple[Any, ...]

Level = tuple[float, float, int]

class SideView:
    stale: Final[bool]
    def __len__(self) -> int: ...
    def __getitem__(self, key: int | slice) -> Any: ...
    def __iter__(self) -> Iterator[Level]: ...

class BookTable:
    digest: Final[int]
    salt: int
    max_symbols: int
    depth: int
    probes: Final[int]
    level_steps: Final[int]
    levels: Final[int]
    budget: int
    symbol_bytes: int
    level_bytes: int
    def __init__(self) -> None: ...
    def __len__(self) -> int: ...
    def __contains__(self, symbol: object) -> bool: ...
    def get(self, symbol: str) -> Record | None: ...
    def set(self, symbol: str, values: tuple[Any, ...], book: tuple[Any, ...] | None) -> None: ...
    def view(self, symbol: str) -> Record | None: ...
    def patch(
        self, symbol: str, values: tuple[Any, ...], book: tuple[Any, ...] | None, bids: Any, asks: Any
    ) -> None: ...
    def items(self) -> list[tuple[str, Record]]: ...
    def symbol_hash(self, symbol: str) -> int | None: ...
    def clear(self) -> None: ...

class Fix44Run:
    def __init__(self, table: BookTable, max_prices: int) -> None: ...
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
    ) -> tuple[int, int, int, bytes, int, bytes, list[bytes] | None]: ...
