"""``python -m feedha`` is ``feedha``."""

import sys

from feedha.cli import main

sys.exit(main())
