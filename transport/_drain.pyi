"""Type stubs for the C extension transport/_drain.c (a line's queued messages in one call)."""

from typing import Final

WRONG_PARTS: Final[int]
OTHER_TOPIC: Final[int]
libzmq_path: Final[str]

def zmq_version_info() -> tuple[int, int, int]: ...
def drain(socket: int, topic: bytes, limit: int, /) -> list[bytes | int]: ...
