"""``feedha-fix``'s reference engine: the converter table's parser over the Python loop.

It produces byte for byte what the C fast path produces for the same input
(``tests/unit/adapter/test_fastpath.py`` compares them), about thirty times
slower. It may stop at fewer places than the C path (the C path also hands
over non-canonical numbers, duplicate fields and non-ASCII symbols, which the
careful path converts the same way); where both convert, the bytes agree.
"""

from __future__ import annotations

from feedha.adapter.conversion._reference import LoopEngine
from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.formats.feedha_fix.parser import Converter
from feedha.adapter.formats.feedha_fix.state import FeedhaFixState
from feedha.adapter.formats.feedha_fix.table import ConverterTable

__all__ = ["ReferenceEngine"]


class ReferenceEngine(LoopEngine):
    """``feedha-fix``'s engine in pure Python: the converter table's parser over the Python loop.

    Args:
        table: the checked converter table.
    """

    def __init__(self, table: ConverterTable) -> None:
        super().__init__(FeedhaFixState())
        self.table = table
        self.converter = Converter(table)

    def parse(self, body: bytes) -> SourceMessage:
        """Convert one message body with the converter table (raises ``ConversionError``)."""
        return self.converter.parse(body)
