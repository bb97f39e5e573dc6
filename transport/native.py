"""Loading a C extension that calls libzmq directly, only where it calls pyzmq's own libzmq.

The source pump (``feedha.adapter._pump``) and the subscriber's drain
(``feedha.transport._drain``) call libzmq on the handles of pyzmq's sockets. That is
sound only when both use one and the same libzmq: each extension binds at import to
the library pyzmq loaded and reports its version, and :func:`bound_to_pyzmq` accepts
the extension only when that version is pyzmq's.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import zmq


def bound_to_pyzmq(module_name: str) -> tuple[ModuleType | None, str]:
    """The extension ``module_name``, or ``None`` and why it cannot run (``""`` when it can).

    The module must define ``zmq_version_info()`` and ``libzmq_path``, as feedha's
    libzmq-calling extensions do.
    """
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        return None, f"the C extension {module_name} is not available ({exc})"
    if module.zmq_version_info() != zmq.zmq_version_info():
        return None, (
            f"its libzmq ({module.libzmq_path}, {module.zmq_version_info()}) is not pyzmq's "
            f"({zmq.zmq_version_info()})"
        )
    return module, ""
