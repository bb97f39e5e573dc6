"""Which conversion engine an adapter runs: the one place that chooses.

See :mod:`adapter.conversion.engine` for what an engine is.
"""

from __future__ import annotations

import logging
from typing import Final

from feedha.adapter.conversion import _native
from feedha.adapter.conversion._reference import ReferenceEngine
from feedha.adapter.conversion.engine import ConversionEngine
from feedha.adapter.conversion.table import ConverterTable

logger = logging.getLogger(__name__)

__all__ = ["IS_NATIVE_BUILT", "make_engine"]

IS_NATIVE_BUILT: Final = _native.AVAILABLE


def make_engine(table: ConverterTable, *, prefer_native: bool = True) -> ConversionEngine:
    """The engine for ``table``: native when it can run, the Python reference otherwise (logged).

    Args:
        table: the checked converter table.
        prefer_native: ``False`` forces the reference engine (tests, comparisons).

    Returns:
        A :class:`~adapter.conversion._native.NativeEngine` when the C extension
        is built and supports every feature ``table`` uses, else a
        :class:`~adapter.conversion._reference.ReferenceEngine`.
    """
    if prefer_native:
        reason = _native.unsupported_reason(table)
        if reason is None:
            return _native.NativeEngine(table)
        logger.warning("conversion runs on the Python reference engine (~30x slower): %s", reason)
    return ReferenceEngine(table)
