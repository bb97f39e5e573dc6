"""Logging set-up shared by the commands: ``--log-level`` and ``--log-format text|json``.

Logs go to stderr (stdout carries each command's own output: JSON status
events, tables). ``--log-format json`` writes one JSON object per record, for
log collectors::

    {"ts": "2026-11-30T09:15:02.114Z", "level": "INFO", "logger": "feedha.adapter.runner",
     "message": "promoted to active", "pid": 4121}

with ``"exc"`` holding the traceback when there is one.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from typing import Final, TextIO

FORMATS: Final = ("text", "json")
LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ms), level, logger, message, pid, and any traceback."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        entry: dict[str, object] = {
            "ts": f"{seconds}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False)


def _level(text: str) -> str:
    level = text.strip().upper()
    if level not in LEVELS:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(LEVELS)} (any case)")
    return level


def add_arguments(parser: argparse.ArgumentParser, *, default_level: str = "INFO") -> None:
    """Declare ``--log-level`` and ``--log-format``.

    Args:
        parser: the command's parser.
        default_level: the level when none is given.
    """
    parser.add_argument(
        "--log-level",
        type=_level,
        default=default_level,
        metavar="LEVEL",
        help=f"logging level: {', '.join(LEVELS)} (default: %(default)s)",
    )
    parser.add_argument(
        "--log-format",
        choices=FORMATS,
        default="text",
        help="log records on stderr as text lines or one JSON object per line (default: %(default)s)",
    )


def configure(level: str = "INFO", log_format: str = "text", *, stream: TextIO | None = None) -> None:
    """Send the root logger's records to stderr at ``level``, as text or JSON.

    Args:
        level: a level name.
        log_format: ``"text"`` or ``"json"``.
        stream: where to write (default: stderr).

    Raises:
        ValueError: an unknown format.
    """
    if log_format not in FORMATS:
        raise ValueError(f"log_format must be one of {FORMATS}, got {log_format!r}")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler])  # a no-op where logging is set up


def configure_from(args: argparse.Namespace) -> None:
    """:func:`configure` from the ``--log-level``/``--log-format`` of parsed arguments."""
    configure(getattr(args, "log_level", "INFO"), getattr(args, "log_format", "text"))
