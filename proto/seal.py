"""Sealed packets (wire version 2): AES-256-GCM over a line packet's blocks, for multicast lines.

Provisional implementation; the documented codec replaces it (docs/wire-format.md).
Layout: the v1 header with version 2, then u32 key id, 12-byte nonce, the
ciphertext of the blocks and the 16-byte tag; AAD = header + key id.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from proto.errors import ProtoError

SEALED_VERSION: Final = 2
KEY_BYTES: Final = 32
_HEADER: Final = 32
_KEY_ID: Final = struct.Struct(">I")
_NONCE: Final = 12
_TAG: Final = 16
_PREFIX: Final = _HEADER + _KEY_ID.size + _NONCE


class SealError(ProtoError):
    """A sealed packet that cannot be opened (``reason``: truncated, version, unknown-key, tag)."""

    subject = "bad sealed packet"


@dataclass(frozen=True, slots=True)
class SealKey:
    """A channel's packet key."""

    key_id: int
    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not 0 <= self.key_id < 2**32:
            raise ValueError(f"key_id must be a u32, got {self.key_id}")
        if len(self.key) != KEY_BYTES:
            raise ValueError(f"a seal key is {KEY_BYTES} bytes, got {len(self.key)}")

    @classmethod
    def new(cls, key_id: int) -> SealKey:
        """A fresh random key."""
        return cls(key_id, os.urandom(KEY_BYTES))


class Sealer:
    """Seals v1 packets with one key."""

    def __init__(self, key: SealKey) -> None:
        self.key = key
        self._aead = AESGCM(key.key)
        self._salt = os.urandom(4)
        self._counter = 0
        self._key_id = _KEY_ID.pack(key.key_id)

    def seal(self, packet: bytes) -> bytes:
        """A v1 packet -> the v2 packet."""
        self._counter += 1
        nonce = self._salt + self._counter.to_bytes(8, "big")
        header = packet[:2] + bytes([SEALED_VERSION]) + packet[3:_HEADER] + self._key_id
        return header + nonce + self._aead.encrypt(nonce, packet[_HEADER:], header)


class Opener:
    """Opens v2 packets with the last few keys."""

    def __init__(self, keys: tuple[SealKey, ...] = (), *, keep: int = 4) -> None:
        self._keep = keep
        self._keys: dict[int, AESGCM] = {}
        for key in keys:
            self.add(key)

    def add(self, key: SealKey) -> None:
        """Keep ``key`` (dropping the oldest beyond ``keep``)."""
        self._keys.pop(key.key_id, None)
        self._keys[key.key_id] = AESGCM(key.key)
        while len(self._keys) > self._keep:
            del self._keys[next(iter(self._keys))]

    def open(self, packet: bytes) -> bytes:
        """A v2 packet -> its v1 packet.

        Raises:
            SealError: cannot be opened.
        """
        if len(packet) < _PREFIX + _TAG:
            raise SealError("truncated", f"{len(packet)} bytes")
        if packet[2] != SEALED_VERSION:
            raise SealError("version", f"version {packet[2]}")
        (key_id,) = _KEY_ID.unpack_from(packet, _HEADER)
        aead = self._keys.get(key_id)
        if aead is None:
            raise SealError("unknown-key", f"key {key_id}")
        try:
            body = aead.decrypt(packet[_HEADER + 4 : _PREFIX], packet[_PREFIX:], packet[: _HEADER + 4])
        except InvalidTag:
            raise SealError("tag", "forged, tampered or sealed with another key") from None
        return packet[:2] + b"\x01" + packet[3:_HEADER] + body
