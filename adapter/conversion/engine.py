"""The conversion engine: which implementation turns source frames into numbered wire blocks.

Theory of operation
-------------------
The adapter core converts every source frame through one
:class:`ConversionEngine`. An engine owns the conversion state and does two
kinds of work:

* :meth:`ConversionEngine.run` takes a *run* of ordinary messages of a frame
  from a byte position: well-formed, strictly in sequence, before the next
  position the sync rules watch (``stop_seq``), whose values fit and whose
  block fits the packet. It parses, applies, encodes and frames each of
  them and returns a :class:`Run`. At anything else it stops and says why
  (:class:`Stop`); the core takes that one message through its careful path
  and calls ``run`` again after it.
* The careful path's steps, one message at a time: :meth:`parse` (raises
  :class:`~adapter.errors.ConversionError` naming the reason),
  ``state.preview``/``state.set_symbol`` and :meth:`encode`.

Each input format brings its engine (:mod:`adapter.formats`, the
registry), and chooses between its C run and the Python one as all native
code is chosen (:mod:`adapter._native_code`): where its C run is built,
``run`` is that C call over a state that lives in C; else
:class:`~adapter.conversion._reference.LoopEngine`, the same loop in Python,
byte for byte the same output (``feedha-fix``'s choice:
:func:`adapter.formats.feedha_fix.choice.make_engine`).

The careful path is the same Python code in either, so how an unusual message
is handled never depends on the engine. Pure: no sockets, no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Final, NamedTuple

from feedha.adapter.conversion.codec import encode_update
from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.conversion.source_seq import peek_source_seq
from feedha.adapter.conversion.state import ConversionState, SymbolValues
from feedha.proto import fix

__all__ = ["SKIPPED", "ConversionEngine", "Run", "RunFunction", "RunTuple", "Stop"]


MESSAGE_TYPE_CHARS: Final = 8  # the most of a type a count names (a hostile 35= is cut there)
# The reason a parser raises for a message that is no market data (a session or directory
# message): the core counts it as skipped, never quarantines it.
SKIPPED: Final = "skipped"


class Stop(enum.IntEnum):
    """Why a run stopped (``scripts/gen_constants.py`` makes these the C module's ``STOP_*``)."""

    END = 0  # the frame is done
    SLOW = 1  # the message at ``pos`` needs the careful path
    ROOM = 2  # the packet is full
    COUNT = 3  # ``max_count`` messages were taken


class Run(NamedTuple):
    """What one run converted (a run function returns these fields as a plain tuple, in this order).

    Attributes:
        pos: the frame position after the last converted message (where the run stopped).
        messages: how many messages it converted.
        stop: why it stopped.
        blocks: their wire blocks back to back (empty when not publishing).
        first_source_seq: the first message's source_seq; the others follow by one (0 when none).
        digests: the conversion-state digest after each message, native uint64s (8 bytes each).
        payloads: each message's encoded ``MarketUpdate`` (only when asked for).
    """

    pos: int
    messages: int
    stop: int  # a Stop value
    blocks: bytes
    first_source_seq: int
    digests: bytes
    payloads: list[bytes] | None


RunTuple = tuple[int, int, int, bytes, int, bytes, list[bytes] | None]
RunFunction = Callable[[bytes, int, int, int, int, int, int, int, bool, bool], RunTuple]


class ConversionEngine:
    """Converts one input format's source messages into one conversion state.

    Args:
        state: the conversion state it applies messages to.
    """

    is_native: bool = False

    def __init__(self, state: ConversionState) -> None:
        self.state = state

    def __repr__(self) -> str:
        return f"<{type(self).__name__} [symbols={len(self.state)}, digest={self.state.digest:016x}]>"

    def run_function(self) -> RunFunction:
        """The function that converts runs (called once per run: the hot path takes no detour).

        It takes, positionally, what :meth:`run` takes and returns the fields of
        a :class:`Run` as a plain tuple (for the native engine it is the C call itself).
        """
        return self.run

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
    ) -> RunTuple:
        """Convert the run of ordinary messages of ``frame`` from byte ``pos``.

        Args:
            frame: a source frame (one or more FIX messages back to back).
            pos: where to start in it.
            expect_seq: the source_seq the next message must carry (0: any, the first ever).
            stop_seq: stop before a message with ``source_seq >= stop_seq`` (0: never).
            room: bytes left in the current packet; negative for an empty packet of ``-room``
                bytes, whose first block always fits.
            max_count: convert at most this many messages.
            publish_time_ns: the publish time stamped on every message.
            source_stream: the source stream number written in every block.
            publish: encode blocks (an adapter that does not publish only converts).
            want_payloads: also return each payload (for the journal).

        Returns:
            The fields of a :class:`Run` (``Run._make`` names them); its messages are applied
            to the state.
        """
        raise NotImplementedError

    # How source frames are cut into messages (FIX here; itch50 overrides all six).
    next_message = staticmethod(fix.next_message)  # (body or None, next position)
    split_messages = staticmethod(fix.split_messages)  # (bodies, malformed stretches)
    find_seq = staticmethod(fix.find_seq_num)  # the position a malformed stretch names, if any
    decode_reset = staticmethod(fix.decode_sequence_reset)  # a SequenceReset's (seq, new seq)
    peek_seq = staticmethod(peek_source_seq)  # a body's source_seq (raises ConversionError)

    @staticmethod
    def message_type(body: bytes) -> str:
        """A message body's type for the counts of what was skipped: FIX's ``35=`` (``?``: none)."""
        if not body.startswith(b"35="):
            return "?"
        end = body.find(b"\x01", 3, 3 + MESSAGE_TYPE_CHARS + 1)
        return body[3:end].decode("ascii", "replace") if end > 3 else "?"

    def source_frame(self, frame: bytes) -> bytes:
        """The frame to convert for one source frame as received (FIX: itself)."""
        return frame

    def parse(self, body: bytes) -> SourceMessage:
        """Convert one message body (the careful path).

        Raises:
            ConversionError: with the reason.
        """
        raise NotImplementedError

    def encode(self, msg: SourceMessage, values: SymbolValues, publish_time_ns: int) -> bytes:
        """The ``MarketUpdate`` payload of one converted message with its symbol's values."""
        return encode_update(msg, values, publish_time_ns=publish_time_ns)

    def encode_staged(
        self, msg: SourceMessage, staged: Mapping[str, SymbolValues], publish_time_ns: int
    ) -> bytes:
        """The payload of one message with what ``state.stage`` gave (the careful path)."""
        return self.encode(msg, staged[msg.symbol], publish_time_ns)
