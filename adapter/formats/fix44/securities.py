"""``fix44``'s security table: SecurityID (or ``SecurityIDSource:SecurityID``) -> symbol, from YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import yaml

from feedha.adapter.errors import ConfigError

__all__ = ["MAX_SECURITIES", "load_securities"]

MAX_SECURITIES: Final = 1_000_000


def load_securities(path: Path) -> dict[str, str]:
    """Read a ``fix44`` security table: YAML, ``SecurityID`` (or ``SecurityIDSource:SecurityID``) -> symbol.

    Raises:
        ConfigError: unreadable, not a mapping of non-empty strings, or too large.
    """
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"security table {path}: {exc}") from exc
    if not isinstance(raw, dict) or len(raw) > MAX_SECURITIES:
        raise ConfigError(f"security table {path}: must be a mapping of at most {MAX_SECURITIES} entries")
    table = {str(key): str(value) for key, value in raw.items()}
    empty = [key for key, value in table.items() if not key or not value]
    if empty:
        raise ConfigError(f"security table {path}: empty id or symbol at {empty[:3]}")
    return table
