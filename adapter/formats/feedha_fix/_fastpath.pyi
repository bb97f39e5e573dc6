"""Type stubs for the C extension adapter/formats/feedha_fix/_fastpath.c."""

from collections.abc import Sequence
from typing import Any, Final

# The constants shared with Python (_conversion_constants.h, _fastpath_constants.h; scripts/gen_constants.py).
BLOCK_OVERHEAD: Final[int]
BLOCK_LENGTH_COVERS: Final[int]
MAX_PAYLOAD: Final[int]
MAX_SOURCE_SEQ: Final[int]
ENV_FIXED: Final[int]
MAX_EXTRAS: Final[int]
OP_ADD: Final[int]
OP_SUB: Final[int]
OP_MUL: Final[int]
OP_DIV: Final[int]
OP_MEAN: Final[int]
OP_MIN: Final[int]
OP_MAX: Final[int]
OP_COUNT: Final[int]
TIME_FIX: Final[int]
TIME_INT: Final[int]
PRICE_DOUBLE: Final[int]
PRICE_INT: Final[int]
STOP_END: Final[int]
STOP_SLOW: Final[int]
STOP_ROOM: Final[int]
STOP_COUNT: Final[int]

_Values = tuple[int, float, float, float, float, int, float, float, float]

def blake2b_64(data: bytes | bytearray | memoryview, /) -> int: ...

class State:
    def __init__(self) -> None: ...
    @property
    def digest(self) -> int: ...
    salt: int
    max_symbols: int
    @property
    def probes(self) -> int: ...
    def apply(self, symbol: str, entries: Sequence[tuple[int, float, int, float]], /) -> _Values: ...
    def get(self, symbol: str, /) -> _Values | None: ...
    def symbol_hash(self, symbol: str, /) -> int | None: ...
    def set(self, symbol: str, values: tuple[Any, ...], /) -> None: ...
    def items(self) -> list[tuple[str, _Values]]: ...
    def clear(self) -> None: ...
    def __len__(self) -> int: ...
    def __contains__(self, symbol: object, /) -> bool: ...

class FastPath:
    def __init__(self, state: State, spec: dict[str, Any]) -> None: ...
    @property
    def state(self) -> State: ...
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
