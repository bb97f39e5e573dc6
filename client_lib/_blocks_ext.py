"""The client's C extension, ``feedha.client._blocks``, or why it is not there.

Loaded once for the modules whose Python it replaces (``_live_blocks.py``,
``_payload_fields.py``): each picks its function from :data:`BLOCKS`, or its
fallback when it is ``None``, and warns with :data:`WHY_NOT_BUILT`.
"""

from __future__ import annotations

from types import ModuleType

__all__ = ["BLOCKS", "WHY_NOT_BUILT"]


def _load() -> tuple[ModuleType | None, str | None]:
    try:
        from feedha.client import _blocks
    except ImportError as exc:
        return None, (
            f"the C extension feedha.client._blocks is not built ({exc}); install feedha where a C "
            "compiler and the Python headers are, or run `python setup.py build_ext --inplace`"
        )
    return _blocks, None


BLOCKS, WHY_NOT_BUILT = _load()
