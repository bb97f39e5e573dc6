"""Type stubs for the C extension adapter/_pump.c (the source pump)."""

from collections.abc import Callable
from typing import Any, Final

from feedha.adapter.conversion.engine import RunFunction
from feedha.adapter.journal._reference import Appender

# The constants shared with Python (_pump_constants.h, scripts/gen_constants.py).
HEADER_SIZE: Final[int]
VERSION: Final[int]
MAX_COUNT: Final[int]
MAGIC_0: Final[int]
MAGIC_1: Final[int]
STOP_END: Final[int]
STOP_SLOW: Final[int]
STOP_ROOM: Final[int]
STOP_COUNT: Final[int]
PUMP_DEADLINE: Final[int]
PUMP_SOCKET: Final[int]
PUMP_FRAME: Final[int]
PUMP_BUDGET: Final[int]
PUMP_SIGNAL: Final[int]
PUMP_ERROR: Final[int]
PUMP_DRAINED: Final[int]
PUMP_MODE_SEND: Final[int]
PUMP_MODE_HOLD: Final[int]
PUMP_MODE_CONVERT: Final[int]
HELD_RECORDS: Final[int]
HELD_PACKET: Final[int]
UNBOUNDED_ROOM: Final[int]
UNBOUNDED_COUNT: Final[int]

libzmq_path: Final[str]

def zmq_version_info() -> tuple[int, int, int]: ...

class Pump:
    def __init__(
        self,
        run: RunFunction,
        frame_of: Callable[[bytes], bytes] | None,
        journal: Appender | None,  # the journal writer's live tail (JournalWriter.appender)
        topic: bytes,
        channel: int,
        adapter: int,
        source_stream: int,
        max_packet_bytes: int,
    ) -> None: ...
    def run(
        self,
        source: int,
        sync: int,
        control: int,
        line: int,
        deadline_ns: int,
        wait_ns: int,
        expect_seq: int,
        stop_seq: int,
        next_msg_seq: int,
        term: int,
        mode: int,
        journal: bool,
        max_frames: int,
        max_bytes: int,
        batch_ns: int = 0,
        report: tuple[int, int, int, bytes, bytes, bytes, int, int, int, int] | None = None,
        journal_upto: int = 0,
        /,
    ) -> tuple[Any, ...]: ...

def encode_report(
    head: bytes,
    inner_head: bytes,
    inner_tail: bytes,
    send_time_ns: int,
    next_msg_seq: int,
    next_source_seq: int,
    last_source_seq: int,
    last_msg_seq: int,
    digest: int,
    /,
) -> bytes: ...
