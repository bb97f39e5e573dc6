"""The conflated line's shell: its socket (an XPUB), sealed and guarded like the real-time line.

The intervals, their numbering and their bytes are the core's
(:mod:`adapter.core.conflated_side`); the runner hands each
``PublishConflated`` action's packet to :meth:`ConflatedLineSocket.send`.
The socket is served like the line (:class:`~adapter.line.SealedSocket`): CURVE
with ZAP under the ``conflated`` domain, a key that loses access cut off
alone, and a fresh bind after a revocation it cannot cut off. A multicast
conflated line with CURVE is sealed with the admin server's channel key, as
the real-time line is.
"""

from __future__ import annotations

import logging
from typing import Any

from feedha.adapter.access import CONFLATED
from feedha.adapter.config import AdapterConfig
from feedha.adapter.line import SealedSocket
from feedha.adapter.zap import DataPlaneGuard

logger = logging.getLogger(__name__)

__all__ = ["ConflatedLineSocket"]


class ConflatedLineSocket(SealedSocket):
    """The conflated line of one adapter.

    Args:
        config: the adapter's configuration (``conflate_line_endpoint`` set).
        guard: CURVE for the socket.
    """

    def __init__(self, config: AdapterConfig, guard: DataPlaneGuard) -> None:
        endpoint = config.conflate_line_endpoint
        if endpoint is None:
            raise ValueError("ConflatedLineSocket needs config.conflate_line_endpoint")
        super().__init__(endpoint, CONFLATED, config, guard)

    def status(self) -> dict[str, Any]:
        """The conflated line's bytes and sealing."""
        return {"bytes": self.bytes_sent, **self.seal.status()}
