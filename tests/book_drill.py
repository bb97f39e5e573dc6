"""Running ``feedha drill book`` from a test: the one invocation the fix44 and itch50 drill tests share."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

KEYS = [
    "sent", "delivered", "lost", "unaccounted", "source_gaps", "line_holes", "conflicts", "quarantined",
    "skipped", "achieved_rate", "books", "stats", "log",
]  # fmt: skip


def run_book_drill(
    input_format: str, capture: Path, *args: str, timeout: float
) -> tuple[int, dict[str, Any]]:
    """``feedha drill book --format FMT --file CAPTURE --kill active --json ARGS``: exit code, result."""
    out = subprocess.run(
        [sys.executable, "-m", "feedha", "drill", "book", "--format", input_format, "--file", str(capture),
         "--kill", "active", "--json", *args],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert out.stdout, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return out.returncode, result
