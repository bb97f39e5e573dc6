"""The client library's exceptions: one base, split by fault.

``ConfigError`` is the caller's fault (a bad argument, named in the message);
``ProtocolError`` is the remote side's fault (bytes that do not follow the
wire format or the message schema); ``TransportError`` wraps what ZeroMQ
raised; ``ClosedError`` is using a subscriber after ``close()``. The admin
client's errors (login, entitlements) live with it in ``admin_client.errors``
(``client_lib`` re-exports them).

The line arbiter never raises on bad packets: it counts and drops them. A
``ProtocolError`` reaches the caller only where the caller asked for the
bytes to be interpreted, e.g. ``Delivery.update`` on a payload that is not a
``MarketUpdate``.
"""

from __future__ import annotations


class ClientError(Exception):
    """Base of every error the client library raises on purpose."""


class ConfigError(ClientError, ValueError):
    """A bad argument or configuration value.

    Attributes:
        parameter: the name of the offending parameter.
        value: the value that was refused.
    """

    def __init__(self, parameter: str, value: object, reason: str) -> None:
        super().__init__(f"{parameter}={value!r}: {reason}")
        self.parameter = parameter
        self.value = value


class ProtocolError(ClientError):
    """Bytes from a line that do not follow the wire format or the schema.

    Attributes:
        reason: a short machine-readable cause (``"magic"``, ``"channel"``,
            ``"payload"``, ...).
    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"protocol error ({reason}): {detail}")
        self.reason = reason


class TransportError(ClientError):
    """ZeroMQ refused an operation (bad endpoint, context terminated, ...)."""


class ClosedError(ClientError):
    """The subscriber was used after it was closed."""


class ReplayFailed(ClientError):
    """A time window could not be replayed: refused (not entitled, a bad request), or no service answered.

    Attributes:
        status: the refusing reply's status name (``""``: no service answered in time).
    """

    def __init__(self, message: str, status: str = "") -> None:
        super().__init__(message)
        self.status = status


class ModelVersionError(ClientError):
    """A route's message model is one this client cannot decode (docs/wire-format.md, "Message models").

    Attributes:
        channel: the channel's name.
        model: the model's name the route named.
        version: its ``MAJOR.MINOR`` version as the route named it.
    """

    def __init__(self, channel: str, model: str, version: str, reason: str) -> None:
        super().__init__(f"channel {channel}: message model {model!r} version {version!r}: {reason}")
        self.channel = channel
        self.model = model
        self.version = version
