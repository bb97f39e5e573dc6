"""The adapter package's exceptions: one base, split by fault."""

from __future__ import annotations


class AdapterError(Exception):
    """Base of every error the adapter package raises on purpose."""


class ConfigError(AdapterError, ValueError):
    """A bad configuration value; the message names the setting and the value."""


class ConversionError(AdapterError):
    """A source message that cannot be converted (counted and skipped, never fatal).

    Attributes:
        reason: short machine-readable cause, e.g. ``"missing_symbol"``.
    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"cannot convert ({reason}): {detail}")
        self.reason = reason


class SyncProtocolError(AdapterError):
    """A sync-bus event the state machine cannot handle in its current role."""
