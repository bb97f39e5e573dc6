"""Logins over real gRPC: a cancelled login's hash runs to its end in its slot, and counts.

One in-process server per test (port 0), two hashing slots (one kept for keys
in good standing), a short queue. The hash is held by the test
(:class:`HeldHash`) so that "mid-hash" is a state the test controls, not a
race against argon2.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from feedha.admin_server import tokens
from feedha.admin_server.backoff import ADDRESS_BURST, FREE_FAILURES
from feedha.admin_server.config import SecretHashing, ServerConfig
from feedha.admin_server.limits import TARPIT_LEAST_S, Limits
from feedha.admin_server.server import AdminServer
from feedha.proto import admin_pb2, admin_pb2_grpc
from tests.integration.test_admin_server import CHANNELS, POLICY, add_user, eventually

LIMITS = Limits(login_hashes=2, login_queue=2)
CHEAP = SecretHashing(time_cost=1, memory_kib=8, parallelism=1)


class HeldHash:
    """Stands in for argon2: each hash waits until the test lets it go; counts what ran where."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self._lock = threading.Lock()
        self.running = self.most = self.finished = 0
        self.threads: set[str] = set()

    def hold(self, real: Any) -> Any:
        def held(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.running += 1
                self.most = max(self.most, self.running)
                self.threads.add(threading.current_thread().name)
            try:
                self.release.wait(30)
                return real(*args, **kwargs)
            finally:
                with self._lock:
                    self.running -= 1
                    self.finished += 1

        return held


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> HeldHash:
    gate = HeldHash()
    monkeypatch.setattr(tokens, "verify_secret", gate.hold(tokens.verify_secret))
    monkeypatch.setattr(tokens, "hash_secret", gate.hold(tokens.hash_secret))
    yield gate
    gate.release.set()


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[AdminServer, dict[str, tuple[str, str]]]]:
    db, policy = tmp_path / "admin.sqlite", tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    keys = {name: add_user(db, name, groups=("traders",)) for name in ("alice", "bob", "carol")}
    config = ServerConfig(
        port=0, database=db, policy=policy, channels=CHANNELS, limits=LIMITS, secret_hashing=CHEAP
    )
    admin = AdminServer(config)
    await admin.start()
    try:
        yield admin, keys
    finally:
        await admin.stop(grace=None)


def _login(auth: Any, key_id: str, secret: str) -> Any:
    return auth.Login(admin_pb2.LoginRequest(key_id=key_id, secret=secret))


async def _code(call: Any) -> grpc.StatusCode:
    try:
        await call
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    except asyncio.CancelledError:  # what awaiting a call this test cancelled raises
        return grpc.StatusCode.CANCELLED
    return grpc.StatusCode.OK


async def test_a_cancelled_login_keeps_its_slot_and_key_lock_until_its_hash_ends_and_its_failure_counts(
    server: tuple[AdminServer, dict[str, tuple[str, str]]], held: HeldHash
) -> None:
    admin, keys = server
    hub, (key_id, secret) = admin.hub, keys["alice"]
    assert hub is not None
    desk = hub.identity.logins
    async with grpc.aio.insecure_channel(f"127.0.0.1:{admin.port}") as channel:
        auth = admin_pb2_grpc.AdminAuthStub(channel)
        wrong = _login(auth, key_id, "wrong")
        await eventually(lambda: held.running == 1, what="the wrong secret hashing")
        wrong.cancel()
        await eventually(lambda: desk.abandoned == 1, what="the server to see the cancel")
        assert desk.gate.running == 1 and held.running == 1  # the slot is still the hash's
        right = asyncio.ensure_future(_code(_login(auth, key_id, secret)))  # waits for alice's lock
        await asyncio.sleep(0)  # poll interval: give the call a chance to (wrongly) start hashing
        await eventually(lambda: len(desk._locks) == 1, what="alice's lock held")
        assert held.running == 1 and desk.gate.running == 1 and not right.done()
        held.release.set()
        assert await right == grpc.StatusCode.OK
    assert hub.counters.logins == {"failed": 1, "ok": 1}  # the cancelled wrong secret counted
    assert desk.gate.running == 0 and len(desk._locks) == 0
    assert held.threads and all(name.startswith("login-hash") for name in held.threads)
    assert "abandoned=1" in repr(desk)


async def test_a_good_key_whose_caller_left_its_hash_queues_behind_keys_in_good_standing(
    server: tuple[AdminServer, dict[str, tuple[str, str]]], held: HeldHash
) -> None:
    admin, keys = server
    hub = admin.hub
    assert hub is not None
    throttle = hub.identity.logins.throttle
    async with grpc.aio.insecure_channel(f"127.0.0.1:{admin.port}") as channel:
        auth = admin_pb2_grpc.AdminAuthStub(channel)
        left = _login(auth, *keys["carol"])  # the right secret, but its caller will not wait
        await eventually(lambda: held.running == 1, what="carol's hash running")
        left.cancel()
        await eventually(lambda: hub.identity.logins.abandoned == 1, what="the cancel seen")
        held.release.set()
        await eventually(lambda: hub.identity.logins.gate.running == 0, what="the hash done")
        assert hub.counters.logins == {"ok": 1}  # it was checked, and was right...
        assert not throttle.in_good_standing(keys["carol"][0])  # ... yet carol now queues behind others
        assert await _code(_login(auth, *keys["carol"])) == grpc.StatusCode.OK  # waited for: back
        assert throttle.in_good_standing(keys["carol"][0])


async def test_cancelling_wrong_logins_is_no_way_around_the_keys_backoff(
    server: tuple[AdminServer, dict[str, tuple[str, str]]], held: HeldHash
) -> None:
    admin, keys = server
    hub, (key_id, secret) = admin.hub, keys["bob"]
    assert hub is not None
    async with grpc.aio.insecure_channel(f"127.0.0.1:{admin.port}") as channel:
        auth = admin_pb2_grpc.AdminAuthStub(channel)
        for attempt in range(FREE_FAILURES):
            started = held.finished
            guess = _login(auth, key_id, f"guess-{attempt}")
            await eventually(lambda: held.running == 1, what="the guess hashing")
            guess.cancel()  # the guesser never waits for an answer...
            await eventually(lambda a=attempt: hub.identity.logins.abandoned == a + 1, what="the cancel seen")
            held.release.set()
            await eventually(lambda s=started: held.finished == s + 1, what="the hash done")
            await eventually(lambda: hub.identity.logins.gate.running == 0, what="the slot free")
            held.release.clear()
        held.release.set()
        # ... and each guess counted all the same: the key is locked out, its good secret too.
        assert await _code(_login(auth, key_id, secret)) == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert hub.identity.logins.throttle.by_key.failures(key_id) == FREE_FAILURES
    assert hub.counters.logins == {"failed": FREE_FAILURES, "throttled": 1}


async def test_cancelled_logins_never_hash_more_than_the_slots_nor_starve_the_access_passes(
    server: tuple[AdminServer, dict[str, tuple[str, str]]], held: HeldHash
) -> None:
    admin, keys = server
    hub = admin.hub
    assert hub is not None
    async with grpc.aio.insecure_channel(f"127.0.0.1:{admin.port}") as channel:
        auth = admin_pb2_grpc.AdminAuthStub(channel)
        # Cancelled as soon as sent: the keys' right secrets and made-up ids, several rounds.
        for _round in range(5):
            calls = [_login(auth, key_id, secret) for key_id, secret in keys.values()]
            calls += [_login(auth, f"fk_nobody{i}", "x") for i in range(3)]
            await eventually(lambda: held.running >= 1, what="a hash started")
            for call in calls:
                call.cancel()
            await asyncio.gather(*(_code(call) for call in calls))
        # The hashes still held: the access passes run all the same (threads of their own).
        async with asyncio.timeout(10):
            await hub.access.run_pass()
        assert held.running <= LIMITS.login_hashes and hub.identity.logins.gate.running <= LIMITS.login_hashes
        held.release.set()
        await eventually(lambda: hub.identity.logins.gate.running == 0, what="every slot free")
    assert held.most <= LIMITS.login_hashes
    assert all(name.startswith("login-hash") for name in held.threads)


async def test_a_key_logs_in_on_its_own_budget_from_an_address_others_made_fail(
    server: tuple[AdminServer, dict[str, tuple[str, str]]],
) -> None:
    admin, keys = server
    hub = admin.hub
    assert hub is not None
    async with grpc.aio.insecure_channel(f"127.0.0.1:{admin.port}") as channel:
        auth = admin_pb2_grpc.AdminAuthStub(channel)
        # A neighbour behind the same address fails with made-up ids and with carol's key...
        for i in range(int(ADDRESS_BURST)):
            assert await _code(_login(auth, f"fk_made_up_{i}", "x")) == grpc.StatusCode.UNAUTHENTICATED
        assert await _code(_login(auth, keys["carol"][0], "wrong")) == grpc.StatusCode.UNAUTHENTICATED
        assert await _code(_login(auth, "fk_one_more", "x")) == grpc.StatusCode.RESOURCE_EXHAUSTED
        # ... alice mistypes twice (her own free failures), then logs in; bob logs in at once.
        for _ in range(FREE_FAILURES - 1):
            assert await _code(_login(auth, keys["alice"][0], "typo")) == grpc.StatusCode.UNAUTHENTICATED
        assert await _code(_login(auth, *keys["alice"])) == grpc.StatusCode.OK
        assert await _code(_login(auth, *keys["bob"])) == grpc.StatusCode.OK
    assert hub.counters.logins["ok"] == 2 and hub.counters.logins["throttled"] == 1


async def test_a_throttled_login_is_answered_after_the_tarpit_s_hold_and_before_its_deadline(
    server: tuple[AdminServer, dict[str, tuple[str, str]]],
) -> None:
    # A crowd retrying each refusal at once cost ~0.9 ms of the server's CPU a call: each
    # refusal now waits in the tarpit (1 s at least) before it goes out, outside any lock.
    admin, keys = server
    hub = admin.hub
    assert hub is not None
    loop = asyncio.get_running_loop()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{admin.port}") as channel:
        auth = admin_pb2_grpc.AdminAuthStub(channel)
        for i in range(int(ADDRESS_BURST)):  # the address's failures: made-up ids wait 5 s a token now
            assert await _code(_login(auth, f"fk_made_up_{i}", "x")) == grpc.StatusCode.UNAUTHENTICATED
        began = loop.time()
        throttled = [
            auth.Login(admin_pb2.LoginRequest(key_id=f"fk_crowd_{i}", secret="x"), timeout=1.5)
            for i in range(4)
        ]
        await eventually(lambda: hub.identity.logins.tarpit.held == 4, what="four refusals held")
        assert not any(call.done() for call in throttled)
        assert await _code(_login(auth, *keys["bob"])) == grpc.StatusCode.OK  # others are not held up
        # Held 1 s at least, and answered before their deadline: they hear why, not DEADLINE_EXCEEDED.
        codes = await asyncio.gather(*(_code(call) for call in throttled))
        assert codes == [grpc.StatusCode.RESOURCE_EXHAUSTED] * 4
        assert loop.time() - began >= TARPIT_LEAST_S
    assert hub.identity.logins.tarpit.held == 0 and hub.counters.logins["throttled"] == 4
