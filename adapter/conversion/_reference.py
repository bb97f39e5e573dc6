"""The reference run: the whole run of a conversion engine in Python.

:class:`LoopEngine` is the run loop over any engine's ``parse``, ``state.stage``,
``encode_staged`` and ``state.commit``: every format's engine takes it where its
C run is not built, and the tests compare its C run with it.
"""

from __future__ import annotations

from array import array

from feedha.adapter.conversion.engine import ConversionEngine, RunTuple, Stop
from feedha.adapter.errors import ConversionError
from feedha.proto import wire

__all__ = ["LoopEngine"]


class LoopEngine(ConversionEngine):
    """:class:`~adapter.conversion.engine.ConversionEngine` whose runs are the Python loop."""

    is_native = False

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
        state = self.state
        empty_packet = room < 0
        room = abs(room)
        blocks: list[bytes] = []
        payloads: list[bytes] | None = [] if want_payloads else None
        digests = array("Q")
        next_message = self.next_message
        first_seq = count = 0
        stop = Stop.END
        while pos < len(frame):
            if count >= max_count:
                stop = Stop.COUNT
                break
            body, after = next_message(frame, pos)
            try:
                if body is None:
                    raise ConversionError("malformed", "not a FIX message")
                msg = self.parse(body)
                if (expect_seq and msg.source_seq != expect_seq) or (stop_seq and msg.source_seq >= stop_seq):
                    raise ConversionError("out_of_run", "not the next ordinary message")
                staged = state.stage(msg)
            except ConversionError:
                stop = Stop.SLOW
                break
            if publish:
                payload = self.encode_staged(msg, staged, publish_time_ns)
                if len(payload) > wire.MAX_PAYLOAD:
                    stop = Stop.SLOW
                    break
                size = wire.BLOCK_OVERHEAD + len(payload)
                if size > room and not (empty_packet and count == 0):
                    stop = Stop.ROOM
                    break
                room -= size
                blocks.append(wire.encode_block(source_stream, msg.source_seq, payload))
                if payloads is not None:
                    payloads.append(payload)
            state.commit(staged)
            digests.append(state.digest)
            if not count:
                first_seq = msg.source_seq
            count += 1
            expect_seq = msg.source_seq + 1
            pos = after
        return pos, count, stop, b"".join(blocks), first_seq, digests.tobytes(), payloads
