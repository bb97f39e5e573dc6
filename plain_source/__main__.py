"""``python -m feedha.plain_source ...``: the same as ``feedha source ...``."""

from __future__ import annotations

import sys

from feedha.plain_source.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
