"""Pacing a captured feed's playback (pure).

:func:`due_offsets` says when each message of a capture is due: at a fixed
rate, or by the messages' own times (a format's
:attr:`~adapter.formats.capture_face.CaptureFace.time_of`) divided by a
speed, or all at once. Reading and framing a capture are its format's
(``adapter/formats/<name>/capture.py``, asked for through
:mod:`adapter.formats.capture_registry`). Pure: no clock, no file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["due_offsets"]


def due_offsets(
    messages: Sequence[bytes],
    *,
    rate: float | None = None,
    speed: float | None = None,
    burst: tuple[float, float] | None = None,
    time_of: Callable[[bytes], int | None] | None = None,
) -> list[float]:
    """When each message is due, in seconds from the start of the playback.

    Args:
        messages: the capture's messages.
        rate: a fixed rate (messages/s).
        speed: pace by the messages' own times, ``speed`` times as fast (1.0: as recorded);
            a message without a readable time goes with the one before it.
        time_of: a message's own time in ns (``None``: none readable), for ``speed``.
        burst: ``(burst_rate, seconds)``: the first ``seconds`` at ``burst_rate``, then ``rate``
            (with ``rate`` only).
        With neither, everything is due at once (as fast as possible).

    Raises:
        ValueError: both given, or one not positive; a burst without a rate, or not positive;
            a speed without ``time_of``.
    """
    if rate is not None and speed is not None:
        raise ValueError("give a rate or a speed, not both")
    if burst is not None and (rate is None or not (burst[0] > 0 and burst[1] > 0)):
        raise ValueError(f"a burst needs a rate and a positive rate and length, got {burst}")
    if rate is not None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, got {rate}")
        return _rate_offsets(len(messages), rate, burst)
    if speed is None:
        return [0.0] * len(messages)
    if speed <= 0:
        raise ValueError(f"speed must be positive, got {speed}")
    if time_of is None:
        raise ValueError("a speed needs the messages' own times, which this format has not")
    offsets: list[float] = []
    first: int | None = None
    previous = 0.0
    for message in messages:
        stamp = time_of(message)
        if stamp is not None and first is None:
            first = stamp
        if stamp is not None and first is not None:
            previous = max(previous, (stamp - first) / 1e9 / speed)  # never backwards
        offsets.append(previous)
    return offsets


def _rate_offsets(count: int, rate: float, burst: tuple[float, float] | None) -> list[float]:
    # Message i is due at i / rate; after a burst of n messages in `seconds`, at seconds + (i - n) / rate.
    if burst is None:
        return [index / rate for index in range(count)]
    burst_rate, seconds = burst
    first = min(count, int(burst_rate * seconds))
    return [index / burst_rate for index in range(first)] + [
        seconds + (index - first) / rate for index in range(first, count)
    ]
