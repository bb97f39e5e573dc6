"""Images for late joiners: every symbol's state at one msg_seq, fetched or collected, checked, delivered.

Theory of operation
-------------------
An adapter serves its channel's image -- every symbol's values right after
msg_seq N, in session S -- in parts (``feedha.v1.ImagePart``), on request
from its replay service (kind 3, docs/wire-format.md "Images") and again and
again on its snapshot line. :class:`ImageAssembler` takes the parts of one
image in any order, checks that they agree (channel, msg_seq, session, part
count), refuses what does not fit or is too large, and says when the image
is whole. :func:`fetch_image` asks a channel's replay services in turn, page
by page, and returns a :class:`ChannelImage`; a subscriber then delivers an
:class:`ImageDelivery` per symbol and joins the lines from N + 1
(``ChannelSpec.start_seq``): the holes between are filled from a journal,
so the image and the live stream meet with no seam.

Everything a service or a snapshot line sends is hostile until checked: a
part that does not decode, disagrees with the others, repeats one, or would
take the image past :data:`MAX_SYMBOLS` symbols or :data:`MAX_IMAGE_BYTES` is
dropped (counted) and the image is asked of the next service.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final, Protocol

from google.protobuf.message import DecodeError

from feedha.client.events import Delivery
from feedha.proto import market_pb2
from feedha.proto.replay import ReplayRequest, ReplayStatus, ReplyStatus, snapshot_request

logger = logging.getLogger(__name__)

__all__ = ["ChannelImage", "ImageAssembler", "ImageDelivery", "fetch_image"]

MAX_SYMBOLS: Final = 2_000_000
MAX_IMAGE_BYTES: Final = 512 * 1024 * 1024
MAX_PARTS: Final = 100_000


@dataclass(frozen=True, slots=True)
class ChannelImage:
    """A channel's whole conversion state right after ``msg_seq``.

    Attributes:
        channel: the channel number.
        msg_seq: the image is the state right after this msg_seq: the stream goes on from msg_seq + 1.
        session: the trading session it is in.
        session_start_ns: when that session began (ns since the epoch; 0: unknown).
        adapter: the adapter whose journal it was built from.
        symbols: every symbol's state, by name.
    """

    channel: int
    msg_seq: int
    session: int
    session_start_ns: int
    adapter: int
    symbols: dict[str, market_pb2.SymbolState] = field(repr=False)

    def deliveries(self) -> Iterator[ImageDelivery]:
        """One :class:`ImageDelivery` per symbol, in symbol order."""
        for symbol in sorted(self.symbols):
            yield ImageDelivery.of(self, symbol)


class ImageDelivery(Delivery):
    """A symbol's state in a channel's image, delivered before the live messages that follow it.

    A :class:`~feedha.client.Delivery` whose ``update`` carries the symbol and
    its ``state`` (no entries), whose ``msg_seq`` is the image's (the live
    stream goes on from ``msg_seq + 1``), and whose ``session`` names the
    trading session. ``is_image`` is true; ``source_stream``, ``source_seq``
    and ``term`` are 0 and ``line`` is -1.
    """

    __slots__ = ("session",)
    session: int
    is_image = True

    @classmethod
    def of(cls, image: ChannelImage, symbol: str) -> ImageDelivery:
        payload = market_pb2.MarketUpdate(symbol=symbol, state=image.symbols[symbol]).SerializeToString(
            deterministic=True
        )
        delivery = cls(
            image.channel, image.msg_seq, 0, 0, -1, 0, image.session_start_ns, payload, 0, len(payload)
        )
        delivery.session = image.session
        return delivery

    def __repr__(self) -> str:
        return f"<ImageDelivery [channel={self.channel}, msg_seq={self.msg_seq}, session={self.session}]>"


class ImageAssembler:
    """Collects the parts of one image (pure: bytes in, an image out).

    Args:
        channel: the channel the parts must name (``None``: any, adopted from the first).
    """

    def __init__(self, channel: int | None = None) -> None:
        self._channel = channel
        self._key: tuple[int, int, int, int] | None = None  # (adapter, msg_seq, session, parts)
        self._parts: dict[int, market_pb2.ImagePart] = {}
        self._symbols = self._bytes = 0
        self.refused = 0

    def __repr__(self) -> str:
        return f"<ImageAssembler [key={self._key}, parts={len(self._parts)}, refused={self.refused}]>"

    @property
    def msg_seq(self) -> int | None:
        """The msg_seq of the image being collected."""
        return None if self._key is None else self._key[1]

    @property
    def next_part(self) -> int:
        """The lowest part number still missing."""
        part = 0
        while part in self._parts:
            part += 1
        return part

    def reset(self) -> None:
        """Start over (another image)."""
        self._key, self._parts, self._symbols, self._bytes = None, {}, 0, 0

    def add(self, data: bytes) -> ChannelImage | None:
        """Take one part; returns the image once every part of it is in.

        A part of another image (a newer one on a snapshot line) starts over with it;
        a malformed, inconsistent or oversized part is refused (counted).
        """
        try:
            part = market_pb2.ImagePart.FromString(data)
        except DecodeError:
            self.refused += 1
            return None
        if not self._plausible(part):
            self.refused += 1
            return None
        key = (part.adapter, part.msg_seq, part.session, part.parts)
        if key != self._key:
            self.reset()
            self._key = key
        if part.part in self._parts:
            return None  # a repeat
        self._symbols += len(part.symbols)
        self._bytes += len(data)
        if self._symbols > min(MAX_SYMBOLS, part.symbol_count) or self._bytes > MAX_IMAGE_BYTES:
            self.refused += 1
            self.reset()
            return None
        self._parts[part.part] = part
        if len(self._parts) < part.parts:
            return None
        return self._finish(part)

    def _plausible(self, part: market_pb2.ImagePart) -> bool:
        if self._channel is not None and part.channel != self._channel:
            return False
        return (
            0 < part.parts <= MAX_PARTS and part.part < part.parts and part.msg_seq > 0 and part.session > 0
        )

    def _finish(self, last: market_pb2.ImagePart) -> ChannelImage | None:
        symbols: dict[str, market_pb2.SymbolState] = {}
        for index in range(last.parts):
            for entry in self._parts[index].symbols:
                symbols[entry.symbol] = entry.state
        self.reset()
        if len(symbols) != last.symbol_count:
            self.refused += 1
            logger.info(
                "image at msg_seq %d: %d symbols, it said %d", last.msg_seq, len(symbols), last.symbol_count
            )
            return None
        return ChannelImage(
            last.channel, last.msg_seq, last.session, last.session_start_ns, last.adapter, symbols
        )


class ReplayServices(Protocol):
    """What :func:`fetch_image` asks of a channel's replay services (a ``ReplayClient``)."""

    def services(self, channel: int) -> tuple[str, ...]:
        """The replay endpoints of ``channel``, the one to ask first first."""
        ...

    def request(
        self, endpoint: str, request: ReplayRequest, *, deadline: float
    ) -> tuple[ReplyStatus, list[bytes]] | None:
        """One request to one service and its reply (``None``: no reply by ``deadline``)."""
        ...


def fetch_image(client: ReplayServices, channel: int, *, budget: float) -> ChannelImage | None:
    """The freshest image of ``channel`` its replay services have, paged.

    A journal's image stops short of a msg_seq the journal lacks until a newer
    checkpoint moves it on, so one service's newest image can be older than
    another's: the services are asked in turn and the image with the highest
    msg_seq wins, unless one is as new as its own journal (then it is taken at once).

    Args:
        client: the channel's replay services (and their sockets, keys and time-outs).
        channel: the channel number.
        budget: most seconds to spend in all.

    Returns:
        The image, or ``None`` when no service had a whole one.
    """
    deadline = time.monotonic() + budget
    best: ChannelImage | None = None
    for endpoint in client.services(channel):
        if time.monotonic() >= deadline:
            break
        got = _from_service(client, endpoint, channel, deadline)
        if got is None:
            continue
        image, newest = got
        if best is None or image.msg_seq > best.msg_seq:
            best = image
        if image.msg_seq >= newest:
            break  # as new as that journal: no need to ask further
    if best is None:
        logger.warning("channel %d: no replay service had an image", channel)
    return best


def _from_service(
    client: ReplayServices, endpoint: str, channel: int, deadline: float
) -> tuple[ChannelImage, int] | None:
    # The image and the newest msg_seq the service's journal held when asked.
    assembler = ImageAssembler(channel)
    msg_seq = 0  # the newest, then the one the first reply named
    for _page in range(MAX_PARTS):
        if time.monotonic() >= deadline:
            return None
        part = assembler.next_part
        request = snapshot_request(channel, 0, msg_seq=msg_seq, part=part)
        reply = client.request(endpoint, request, deadline=deadline)
        if reply is None:
            return None
        status, frames = reply
        if status.status is not ReplayStatus.OK or not frames:
            logger.info("replay service %s: no image (%s %s)", endpoint, status.status.name, status.message)
            return None
        for frame in frames:
            image = assembler.add(frame)
            if image is not None:
                return image, status.newest_seq
        if assembler.msg_seq is None or assembler.next_part == part:
            return None  # nothing usable came back: leave it to the next service
        msg_seq = assembler.msg_seq
    return None
