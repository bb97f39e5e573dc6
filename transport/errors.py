"""The transport package's exceptions: one base, split by kind.

``TransportConfigError`` is a socket set-up that cannot work here (an
``epgm://`` endpoint on a libzmq without OpenPGM, an option libzmq refused,
a bad option value). It is a ``ValueError`` as well, so callers that treat
bad endpoints as bad arguments catch it unchanged.
"""

from __future__ import annotations


class TransportError(Exception):
    """Base of every error the transport package raises on purpose."""


class TransportConfigError(TransportError, ValueError):
    """A socket set-up that cannot work: the message names the endpoint or option and the fix."""
