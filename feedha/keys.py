"""``feedha keys``: CURVE key pairs for adapters (their line and replay service) and sync buses.

``feedha keys new FILE...`` writes a new key pair per FILE: the secret file
(mode 0600, ZeroMQ's certificate format) that ``feedha adapter --curve-key``
or ``--sync-key`` reads, and ``FILE.pub`` beside it with the public key
alone. It prints each public key. A sync-bus key is one pair shared by every
adapter of a channel; each adapter also has its own pair for its line. Files
are written new (0600, or 0644 for the ``.pub``) and moved into place: with
``--force`` an old file, with whatever mode, or a symlink is replaced, never
written through.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from feedha.adapter.zap import write_keys


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``feedha keys``."""
    parser = argparse.ArgumentParser(prog="feedha keys", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    new = sub.add_parser("new", help="write a new CURVE key pair per FILE (FILE: secret, FILE.pub: public)")
    new.add_argument("files", type=Path, nargs="+", metavar="FILE")
    new.add_argument("--force", action="store_true", help="replace existing files")
    new.add_argument("--json", action="store_true", help="print {file: public key} as JSON")
    args = parser.parse_args(argv)
    # lexists: a dangling symlink is something there too (and --force replaces it, never follows it).
    existing = [str(f) for f in args.files if os.path.lexists(f) and not args.force]
    if existing:
        print(f"feedha keys: exists (use --force to replace): {', '.join(existing)}", file=sys.stderr)
        return 2
    made = {str(path): write_keys(path).public.decode() for path in args.files}
    if args.json:
        print(json.dumps(made))
    else:
        for path, public in made.items():
            print(f"{path}: {public}")
    return 0
