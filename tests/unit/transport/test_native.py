"""bound_to_pyzmq: a libzmq-calling extension is used only when it is bound to pyzmq's libzmq."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest
import zmq

from feedha.transport.native import bound_to_pyzmq

FAKE = "feedha_test_fake_libzmq_extension"


@pytest.fixture
def fake_extension() -> Iterator[types.ModuleType]:
    module = types.ModuleType(FAKE)
    module.libzmq_path = "/opt/other/libzmq.so.5"  # type: ignore[attr-defined]
    sys.modules[FAKE] = module
    try:
        yield module
    finally:
        del sys.modules[FAKE]


def test_feedhas_two_extensions_are_bound_to_pyzmqs_libzmq() -> None:
    for name in ("feedha.adapter._pump", "feedha.transport._drain"):
        module, why_not = bound_to_pyzmq(name)
        assert module is not None and why_not == "", why_not
        assert module.zmq_version_info() == zmq.zmq_version_info()


def test_an_extension_that_is_not_built_is_refused_with_its_import_error() -> None:
    module, why_not = bound_to_pyzmq("feedha.transport._not_built")
    assert module is None
    assert why_not.startswith("the C extension feedha.transport._not_built is not available (")


def test_an_extension_bound_to_another_libzmq_is_refused_and_says_which(
    fake_extension: types.ModuleType,
) -> None:
    fake_extension.zmq_version_info = lambda: (3, 2, 5)  # type: ignore[attr-defined]
    module, why_not = bound_to_pyzmq(FAKE)
    assert module is None
    assert "/opt/other/libzmq.so.5" in why_not and "(3, 2, 5)" in why_not
    assert why_not.endswith(f"is not pyzmq's ({zmq.zmq_version_info()})")


def test_an_extension_bound_to_the_same_version_is_taken(fake_extension: types.ModuleType) -> None:
    fake_extension.zmq_version_info = zmq.zmq_version_info  # type: ignore[attr-defined]
    assert bound_to_pyzmq(FAKE) == (fake_extension, "")
