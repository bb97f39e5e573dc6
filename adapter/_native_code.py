"""The two steps every package of the adapter takes to choose its native code.

The pattern is described once, in docs/architecture.md ("Native code"): a C
extension beside the Python reference it replaces, and one ``choice.py`` per
package that decides. Each ``choice.py`` calls :func:`why_not_built` at
import (its ``IS_NATIVE_BUILT``) and :func:`warn_fallback` when it hands out
the reference instead of the extension.
"""

from __future__ import annotations

import importlib
import logging


def why_not_built(module: str) -> str | None:
    """Whether the C extension ``module`` (a dotted name) loads: ``None``, or why not.

    Args:
        module: the extension's full name (``feedha.adapter.journal._native``).

    Returns:
        ``None`` when it imports; otherwise a sentence naming it, the import
        error, and how to build it.
    """
    try:
        importlib.import_module(module)
    except ImportError as exc:
        return (
            f"the C extension {module} is not built ({exc}); install feedha where a C compiler and "
            "the Python headers are, or run `python setup.py build_ext --inplace`"
        )
    return None


def warn_fallback(logger: logging.Logger, what: str, cost: str, reason: str) -> None:
    """Log, as every package does, that ``what`` runs on its Python reference and why.

    Args:
        logger: the choosing module's logger.
        what: the part that falls back (``"journal framing"``).
        cost: how much slower the reference is (``"several times slower"``).
        reason: why the native code cannot run.
    """
    logger.warning("%s runs on the Python reference (%s): %s", what, cost, reason)
