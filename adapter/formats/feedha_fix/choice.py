"""Which ``feedha-fix`` engine an adapter runs: the one place that chooses.

See :mod:`adapter.conversion.engine` for what an engine is. The choice is
made as every package of the adapter makes it (:mod:`adapter._native_code`):
the native engine (the C extension ``_fastpath`` of this folder) where it is
built and takes the table, else the Python reference, with a warning.
"""

from __future__ import annotations

import logging
from typing import Final

from feedha.adapter._native_code import warn_fallback, why_not_built
from feedha.adapter.conversion.engine import ConversionEngine
from feedha.adapter.formats.feedha_fix._fastpath_spec import Unsupported, compile_spec
from feedha.adapter.formats.feedha_fix._reference import ReferenceEngine
from feedha.adapter.formats.feedha_fix.table import ConverterTable

logger = logging.getLogger(__name__)

__all__ = ["IS_NATIVE_BUILT", "make_engine", "unsupported_reason"]

_NOT_BUILT: Final = why_not_built("feedha.adapter.formats.feedha_fix._fastpath")
IS_NATIVE_BUILT: Final = _NOT_BUILT is None


def unsupported_reason(table: ConverterTable) -> str | None:
    """Why the native engine cannot run ``table`` (``None``: it can)."""
    if _NOT_BUILT is not None:
        return _NOT_BUILT
    try:
        compile_spec(table)
    except Unsupported as exc:
        return f"the converter table uses a feature the C fast path lacks ({exc})"
    return None


def make_engine(table: ConverterTable, *, prefer_native: bool = True) -> ConversionEngine:
    """The engine for ``table``: native when it can run, the Python reference otherwise (logged).

    Args:
        table: the checked converter table.
        prefer_native: ``False`` gives the reference engine (tests, comparisons).

    Returns:
        A :class:`~adapter.formats.feedha_fix._native.NativeEngine` when the C extension
        is built and supports every feature ``table`` uses, else a
        :class:`~adapter.formats.feedha_fix._reference.ReferenceEngine`.
    """
    if prefer_native:
        reason = unsupported_reason(table)
        if reason is None:
            from feedha.adapter.formats.feedha_fix._native import NativeEngine

            return NativeEngine(table)
        warn_fallback(logger, "conversion", "~30x slower", reason)
    return ReferenceEngine(table)
