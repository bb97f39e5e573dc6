"""FeedClient and AsyncFeedClient have one API: the same methods, parameters and docstrings.

``AsyncFeedApi`` (client_lib/_feed_api.py) is written once and ``FeedApi`` is
generated from it (scripts/gen_sync_client.py). These tests compare the two
clients as an application sees them, with :mod:`inspect`, so a method added,
changed or overridden on one face only fails here.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from feedha.client import AsyncFeedClient, Delivery, FeedClient

ROOT = Path(__file__).resolve().parents[3]
# The blocking name of each asyncio dunder (the rest keep their names).
TWINS = {"__aenter__": "__enter__", "__aexit__": "__exit__", "__aiter__": "__iter__"}
SHARED_DUNDERS = ("__init__", "__repr__")


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_sync_client", ROOT / "scripts" / "gen_sync_client.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_sync_client"] = module
    spec.loader.exec_module(module)
    return module


generator = _load_generator()


def _blocking(annotation: Any) -> Any:
    # An asyncio annotation (a string: the modules use postponed annotations) in blocking words.
    if not isinstance(annotation, str):
        return annotation
    for name, twin in generator.RENAMES.items():
        annotation = re.sub(rf"\b{name}\b", twin, annotation)
    return annotation


def _face(cls: type) -> dict[str, Any]:
    """The public methods and the shared dunders of a client, by their blocking names."""
    names = [n for n in dir(cls) if not n.startswith("_")] + [*SHARED_DUNDERS, *TWINS, *TWINS.values()]
    return {TWINS.get(n, n): inspect.getattr_static(cls, n) for n in names if hasattr(cls, n)}


def _flavour(function: Any) -> str:
    if inspect.iscoroutinefunction(function):
        return "awaited"
    if inspect.isasyncgenfunction(function):
        return "iterated"
    if inspect.isgeneratorfunction(function):
        return "iterated"
    return "plain"


def differences(blocking: type, asyncio_face: type) -> list[str]:
    """What differs between a blocking client and its asyncio twin (empty: nothing)."""
    mine, theirs = _face(blocking), _face(asyncio_face)
    found = [f"{name}: only on {blocking.__name__}" for name in sorted(set(mine) - set(theirs))]
    found += [f"{name}: only on {asyncio_face.__name__}" for name in sorted(set(theirs) - set(mine))]
    for name in sorted(set(mine) & set(theirs)):
        sync_method, async_method = mine[name], theirs[name]
        if not callable(sync_method) or not callable(async_method):
            found.append(f"{name}: not a method")
            continue
        sync_signature = inspect.signature(sync_method)
        async_signature = inspect.signature(async_method)
        sync_params = [(p.name, p.kind, p.default, p.annotation) for p in sync_signature.parameters.values()]
        async_params = [
            (p.name, p.kind, p.default, _blocking(p.annotation)) for p in async_signature.parameters.values()
        ]
        if sync_params != async_params:
            found.append(f"{name}: parameters {sync_params} != {async_params}")
        if sync_signature.return_annotation != _blocking(async_signature.return_annotation):
            found.append(f"{name}: returns {sync_signature.return_annotation!r}")
        if inspect.getdoc(sync_method) != inspect.getdoc(async_method):
            found.append(f"{name}: docstrings differ")
        expected = {"awaited": "plain", "iterated": "iterated", "plain": "plain"}[_flavour(async_method)]
        if inspect.iscoroutinefunction(sync_method) or _flavour(sync_method) != expected:
            flavours = f"{_flavour(sync_method)} on {blocking.__name__}, {_flavour(async_method)}"
            found.append(f"{name}: {flavours} on {asyncio_face.__name__}")
    return found


def test_the_two_clients_have_one_api() -> None:
    assert differences(FeedClient, AsyncFeedClient) == []


def test_the_api_is_the_one_written_once_not_a_face_of_its_own() -> None:
    # Every public method comes from AsyncFeedApi (or its generated twin), never a client's module.
    for cls, home in ((FeedClient, "FeedApi"), (AsyncFeedClient, "AsyncFeedApi")):
        for name, method in _face(cls).items():
            owner = method.__qualname__.split(".")[0]
            assert owner == home, f"{cls.__name__}.{name} is defined by {owner}, not {home}"


def test_the_async_client_awaits_what_talks_to_the_network_and_iterates_asynchronously() -> None:
    face = _face(AsyncFeedClient)
    awaited = {
        "open",
        "subscribe",
        "modify",
        "cancel",
        "poll",
        "poll_events",
        "close",
        "__enter__",
        "__exit__",
    }
    assert {name for name, method in face.items() if _flavour(method) == "awaited"} == awaited
    assert {name for name, method in face.items() if _flavour(method) == "iterated"} == {
        "deliveries",
        "book_updates",
    }
    plain = {"book", "book_updates_of", "on_status", "stats", "events", "replay", "__iter__"}
    assert plain | {"__init__", "__repr__"} == {n for n, m in face.items() if _flavour(m) == "plain"}
    # events() and replay() return async iterators at once, so a bad window is refused by the call.
    assert inspect.signature(face["replay"]).return_annotation == "AsyncIterator[Delivery | StatusEvent]"
    assert len(face) >= 20


class _Drifted(FeedClient):
    def subscribe(self, symbols: Any, *, initial_image: bool = True) -> Any:  # type: ignore[override]
        """Another docstring."""
        return super().subscribe(symbols, initial_image=initial_image)

    def snapshot(self) -> None:
        """Only on one face."""


class _AwaitsTooLittle(AsyncFeedClient):
    def book(self, symbol: str) -> Any:  # type: ignore[override]
        return None

    def stats(self):  # type: ignore[no-untyped-def]
        return super().stats()


class _Listed(FeedClient):
    def deliveries(self) -> Iterator[Delivery]:
        """Iterate over deliveries of subscribed, entitled symbols until :meth:`close`."""
        return iter(self.poll(0))


def test_drift_is_found_and_named() -> None:
    found = differences(_Drifted, AsyncFeedClient)
    assert "snapshot: only on _Drifted" in found
    assert any(f.startswith("subscribe: parameters") for f in found)
    assert "subscribe: docstrings differ" in found
    found = differences(FeedClient, _AwaitsTooLittle)
    assert any(f.startswith("book: returns") for f in found)  # an override without a docstring
    assert any(f.startswith("stats: returns") for f in found)  # inherits one: the owner test sees it
    listed = differences(_Listed, AsyncFeedClient)
    assert listed == ["deliveries: plain on _Listed, iterated on AsyncFeedClient"]


def test_the_generated_api_is_current_and_an_await_without_a_twin_is_refused() -> None:
    assert (ROOT / generator.TARGET).read_text() == generator.generate()
    source = '"""Doc."""\n\nimport asyncio\n\n\nasync def nap() -> None:\n    await asyncio.sleep(1)\n'
    blocking = generator._apply(source, generator._edits(source))
    assert "def nap() -> None:\n    asyncio.sleep(1)" in blocking
    with pytest.raises(SystemExit, match="asyncio has no blocking twin"):
        generator._refuse_leftovers(blocking)
    with pytest.raises(SystemExit, match="'async' before 'lambda'"):
        generator._edits('"""Doc."""\nasync lambda: 1\n')
