"""The proto package's exceptions: one base for bytes or messages that break a contract.

Every decoder in ``proto`` raises a subclass of :class:`ProtoError` when its
input does not follow its format (``proto.wire.WireError``,
``proto.replay.ReplayProtocolError``, ``proto.fix.FixError``), with a short
machine-readable ``reason``. It is a ``ValueError``, so code that treats bad
input as a bad value catches it unchanged. Bad arguments to the encoders stay
plain ``ValueError``/``TypeError``.
"""

from __future__ import annotations

from typing import ClassVar


class ProtoError(ValueError):
    """Input that does not follow one of proto's formats or contracts.

    Args:
        reason: a short machine-readable cause (``"magic"``, ``"length"``, ...).
        detail: what was found, for people.

    Attributes:
        reason: the ``reason`` argument.
    """

    subject: ClassVar[str] = "bad message"  # how subclasses name what was bad, e.g. "bad packet"

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{self.subject} ({reason}): {detail}")
        self.reason = reason
