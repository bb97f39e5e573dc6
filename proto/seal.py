"""Sealed packets (wire version 2): line packets encrypted and authenticated per channel with AES-256-GCM.

Theory of operation
-------------------
CURVE protects ``tcp://`` lines, but nothing like it exists for ``epgm://``
multicast: anyone on the segment receives every datagram. So on such lines
each packet is *sealed* with the channel's current key, which the admin
server hands only to entitled subscribers. A sealed packet is the v1 packet
of :mod:`proto.wire` with its version byte set to 2 and its body (the blocks)
encrypted::

    offset size field
         0   32 the v1 header, version byte = 2 (readable, authenticated)
        32    4 key id (u32, big-endian)
        36   12 nonce: 4-byte sealer prefix + 8-byte big-endian counter
        48    n ciphertext of the v1 body (empty for a heartbeat)
      48+n   16 GCM tag

The additional authenticated data is bytes 0..36 (header and key id), so a
receiver can route and count by the header before opening, and any change to
it, to the key id, the nonce, the ciphertext or the tag fails the tag check.

Nonces never repeat under one key as long as no two sealers share a prefix
with overlapping counter ranges: a :class:`Sealer` draws a random 4-byte
prefix (the "fixed field" of NIST SP 800-38D 8.2.1) and a random starting
counter below 2**63, then counts up by one per packet. The active and the
backups of a channel seal with the same key, each with its own sealer.

This module is pure: no sockets, no clock (only ``os.urandom`` for keys and
nonce prefixes). docs/wire-format.md ("Sealed packets (version 2)") is the
contract; a unit test checks its worked example.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import struct
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from feedha.proto.errors import ProtoError
from feedha.proto.wire import HEADER_SIZE, MAGIC, SEALED_VERSION, VERSION

logger = logging.getLogger(__name__)

KEY_BYTES: Final = 32  # AES-256
KEY_ID_BYTES: Final = 4
NONCE_BYTES: Final = 12
NONCE_PREFIX_BYTES: Final = 4
TAG_BYTES: Final = 16
KEY_ID_OFFSET: Final = HEADER_SIZE  # 32
NONCE_OFFSET: Final = KEY_ID_OFFSET + KEY_ID_BYTES  # 36; also the length of the AAD
BODY_OFFSET: Final = NONCE_OFFSET + NONCE_BYTES  # 48
# What sealing adds to a v1 packet: key id, nonce and tag.
SEALED_OVERHEAD: Final = BODY_OFFSET - HEADER_SIZE + TAG_BYTES  # 32
MIN_SEALED_BYTES: Final = BODY_OFFSET + TAG_BYTES  # a sealed heartbeat: 64
MAX_KEY_ID: Final = 0xFFFF_FFFF
MAX_COUNTER: Final = 0xFFFF_FFFF_FFFF_FFFF
DEFAULT_KEEP: Final = 4

_VERSION_OFFSET: Final = 2
_KEY_ID: Final = struct.Struct(">I")
_COUNTER: Final = struct.Struct(">Q")
_PLAIN_VERSION_BYTE: Final = bytes([VERSION])
_SEALED_VERSION_BYTE: Final = bytes([SEALED_VERSION])


class SealError(ProtoError):
    """A sealed packet that cannot be opened.

    Attributes:
        reason: a short machine-readable cause: ``"truncated"`` (shorter than a
            sealed heartbeat), ``"magic"``, ``"version"`` (not a version-2
            packet), ``"unknown-key"`` (a key id this opener does not hold) or
            ``"tag"`` (forged, tampered with, or sealed with another key).
    """

    subject = "bad sealed packet"


@dataclass(frozen=True, slots=True)
class SealKey:
    """One channel key: a 32-bit id and 32 secret bytes.

    The repr never shows the key bytes.

    Args:
        key_id: the id carried in every packet sealed with it (0 .. 2**32 - 1).
        key: the AES-256 key, 32 bytes.

    Raises:
        ValueError: an id out of range or a key of the wrong length.
    """

    key_id: int
    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not 0 <= self.key_id <= MAX_KEY_ID:
            raise ValueError(f"key_id must be a u32, got {self.key_id!r}")
        if not isinstance(self.key, bytes) or len(self.key) != KEY_BYTES:
            raise ValueError(f"key must be {KEY_BYTES} bytes, got {len(self.key)}")

    @classmethod
    def new(cls, key_id: int) -> SealKey:
        """Make a fresh random key.

        Args:
            key_id: its id (the admin server numbers a channel's keys upwards).

        Returns:
            The key.
        """
        return cls(key_id, os.urandom(KEY_BYTES))

    def to_text(self) -> str:
        """Encode as ``"ID:KEY"``: the decimal id, a colon, the key in unpadded base64url.

        Returns:
            e.g. ``"7:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"``.
        """
        return f"{self.key_id}:{base64.urlsafe_b64encode(self.key).rstrip(b'=').decode('ascii')}"

    @classmethod
    def from_text(cls, text: str) -> SealKey:
        """Decode the form of :meth:`to_text` (padding optional, surrounding whitespace ignored).

        Args:
            text: ``"ID:KEY"``.

        Returns:
            The key.

        Raises:
            ValueError: not of that form, or an id/key out of range.
        """
        id_text, sep, key_text = text.strip().partition(":")
        if not sep or not id_text.isdigit() or not id_text.isascii():
            raise ValueError("seal key text must be 'ID:base64url-key' with a decimal ID")
        try:
            key = base64.urlsafe_b64decode(key_text + "=" * (-len(key_text) % 4))
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"seal key {id_text}: the key is not base64url") from exc
        return cls(int(id_text), key)


def is_sealed(packet: bytes | memoryview) -> bool:
    """Whether a packet announces itself as sealed (magic ``FH``, version 2); says nothing of its validity.

    Args:
        packet: the packet frame of a line message.

    Returns:
        True for a version-2 packet.
    """
    return len(packet) > _VERSION_OFFSET and packet[:2] == MAGIC and packet[_VERSION_OFFSET] == SEALED_VERSION


class Sealer:
    """Seals the v1 packets of one line with one key.

    Make one per key and process (the active and each backup have their own),
    and a new one when the key changes: a sealer's nonces are unique only
    within itself and are vanishingly unlikely to meet another sealer's.

    Args:
        key: the channel's newest key.
    """

    __slots__ = ("_aead", "_counter", "_key_id", "_key_id_bytes", "_prefix", "sealed")

    def __init__(self, key: SealKey) -> None:
        self._init(key, os.urandom(NONCE_PREFIX_BYTES), int.from_bytes(os.urandom(8), "big") >> 1)

    def _init(self, key: SealKey, prefix: bytes, counter: int) -> None:
        self._aead = AESGCM(key.key)
        self._key_id = key.key_id
        self._key_id_bytes = _KEY_ID.pack(key.key_id)
        self._prefix = prefix
        self._counter = counter
        self.sealed = 0

    @classmethod
    def for_test_vector(cls, key: SealKey, *, prefix: bytes, counter: int) -> Sealer:
        """A sealer with a chosen nonce prefix and counter. **Tests and documented vectors only**:
        two sealers made this way with the same values reuse nonces, which breaks GCM.

        Args:
            key: the key.
            prefix: the 4-byte nonce prefix.
            counter: the counter of the first packet.

        Returns:
            The sealer.

        Raises:
            ValueError: a prefix of the wrong length or a counter out of range.
        """
        if len(prefix) != NONCE_PREFIX_BYTES:
            raise ValueError(f"prefix must be {NONCE_PREFIX_BYTES} bytes, got {len(prefix)}")
        if not 0 <= counter <= MAX_COUNTER:
            raise ValueError(f"counter must be a u64, got {counter}")
        sealer = cls.__new__(cls)
        sealer._init(key, bytes(prefix), counter)
        return sealer

    def __repr__(self) -> str:
        return f"<Sealer [key_id={self._key_id}, sealed={self.sealed}]>"

    @property
    def key_id(self) -> int:
        """The id of the key this sealer seals with."""
        return self._key_id

    def seal(self, packet: bytes) -> bytes:
        """Seal one v1 packet.

        Args:
            packet: a packet as :mod:`proto.wire` builds it (version 1).

        Returns:
            The version-2 packet, ``SEALED_OVERHEAD`` (32) bytes longer.

        Raises:
            ValueError: not a v1 packet (too short, wrong magic or version).
            OverflowError: the counter is spent (after 2**63 packets at least): make a new Sealer.
        """
        if len(packet) < HEADER_SIZE or packet[:2] != MAGIC or packet[_VERSION_OFFSET] != VERSION:
            raise ValueError(f"seal() takes a version-{VERSION} packet, got {bytes(packet[:3])!r}...")
        counter = self._counter
        if counter > MAX_COUNTER:
            raise OverflowError("this sealer has used all its nonces; make a new Sealer")
        self._counter = counter + 1
        self.sealed += 1
        nonce = self._prefix + _COUNTER.pack(counter)
        aad = b"".join(
            (packet[:_VERSION_OFFSET], _SEALED_VERSION_BYTE, packet[3:HEADER_SIZE], self._key_id_bytes)
        )
        return b"".join((aad, nonce, self._aead.encrypt(nonce, packet[HEADER_SIZE:], aad)))


class Opener:
    """Opens sealed packets with the last few keys of a channel.

    Receivers hold the newest keys the admin server handed them, so packets
    sealed just before a rotation (and a backup still sealing with the
    previous key for a moment) still open; a key dropped from the holding
    (by :meth:`remove` or pushed out by newer keys) opens nothing any more.

    Args:
        keys: keys to start with, oldest first.
        keep: how many keys to hold; adding one more drops the oldest.

    Raises:
        ValueError: ``keep`` below 1.
    """

    __slots__ = ("_keep", "_keys")

    def __init__(self, keys: Iterable[SealKey] = (), *, keep: int = DEFAULT_KEEP) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        self._keep = keep
        self._keys: OrderedDict[int, AESGCM] = OrderedDict()
        for key in keys:
            self.add(key)

    def __repr__(self) -> str:
        return f"<Opener [key_ids={list(self._keys)}, keep={self._keep}]>"

    def add(self, key: SealKey) -> None:
        """Hold a key as the newest (re-adding an id replaces its key); drop the oldest beyond ``keep``.

        Args:
            key: the key.
        """
        self._keys.pop(key.key_id, None)
        self._keys[key.key_id] = AESGCM(key.key)
        while len(self._keys) > self._keep:
            dropped, _ = self._keys.popitem(last=False)
            logger.debug("seal key %d dropped (holding %d)", dropped, self._keep)

    def remove(self, key_id: int) -> bool:
        """Stop holding a key.

        Args:
            key_id: its id.

        Returns:
            Whether it was held.
        """
        return self._keys.pop(key_id, None) is not None

    def key_ids(self) -> tuple[int, ...]:
        """The ids held, oldest first."""
        return tuple(self._keys)

    def open(self, packet: bytes) -> bytes:
        """Check and decrypt one sealed packet.

        Args:
            packet: a version-2 packet (any bytes: nothing but :class:`SealError` is raised).

        Returns:
            The v1 packet (version byte 1), for :mod:`proto.wire` to decode.

        Raises:
            SealError: truncated, not version 2, an unknown key id, or a tag mismatch.
        """
        if len(packet) < MIN_SEALED_BYTES:
            raise SealError(
                "truncated", f"{len(packet)} bytes, a sealed packet has at least {MIN_SEALED_BYTES}"
            )
        if packet[:2] != MAGIC:
            raise SealError("magic", f"magic {bytes(packet[:2])!r}, expected {MAGIC!r}")
        version = packet[_VERSION_OFFSET]
        if version != SEALED_VERSION:
            raise SealError("version", f"version {version}, a sealed packet has {SEALED_VERSION}")
        (key_id,) = _KEY_ID.unpack_from(packet, KEY_ID_OFFSET)
        aead = self._keys.get(key_id)
        if aead is None:
            raise SealError("unknown-key", f"key id {key_id}, holding {list(self._keys)}")
        try:
            body = aead.decrypt(packet[NONCE_OFFSET:BODY_OFFSET], packet[BODY_OFFSET:], packet[:NONCE_OFFSET])
        except InvalidTag:
            raise SealError("tag", f"authentication failed under key id {key_id}") from None
        return b"".join((packet[:_VERSION_OFFSET], _PLAIN_VERSION_BYTE, packet[3:HEADER_SIZE], body))
