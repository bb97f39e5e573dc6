"""One memory budget per adapter: the tables count what they hold and refuse past it (``memory_limit``).

The refusal must not depend on the process: the C runs and the Python paths refuse the same
message of the same stream, and a group's backups follow their active's budget (or fail).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from feedha import settings
from feedha.adapter.__main__ import build_parser, config_from_args, memory_budget_of, read_container_limit
from feedha.adapter.conversion import budget
from feedha.adapter.conversion.budget import (
    BASE_BYTES,
    FIX44_SYMBOL_BYTES,
    ITCH50_SYMBOL_BYTES,
    LEVEL_BYTES,
    ORDER_BYTES,
    MiB,
)
from feedha.adapter.core.sync_types import Role
from feedha.adapter.errors import ConfigError
from feedha.adapter.formats.fix44.engine import Fix44Engine
from feedha.adapter.formats.itch50.engine import Itch50Engine
from feedha.proto import moldudp64
from tests.itch50_feed import Played as ItchPlayed
from tests.itch50_feed import convert as itch_convert
from tests.unit.adapter.test_fastpath import _core, _feed, _frames
from tests.unit.adapter.test_fix44_run import Played, _x, convert
from tests.unit.adapter.test_itch50 import add_order, delete, directory

from .group_harness import CoreGroup
from .test_conflate_config import BASE


@pytest.mark.parametrize(
    ("text", "size"),
    [("805306368", 805306368), ("768Mi", 768 * MiB), ("1GiB", 1 << 30), ("1.5G", 1_500_000_000),
     ("500 MB", 500_000_000), ("64ki", 65536)],
)  # fmt: skip
def test_sizes_read_as_operators_write_them(text: str, size: int) -> None:
    assert budget.parse_size(text) == size


@pytest.mark.parametrize("text", ["", "1X", "-1G", "one gig", "1e9"])
def test_a_bad_size_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="is not a size"):
        budget.parse_size(text)


def test_the_container_limit_comes_from_cgroup_v2_then_v1_and_none_means_none() -> None:
    assert budget.container_limit("1073741824\n", None) == 1 << 30
    assert budget.container_limit("max\n", "536870912") == 512 * MiB  # v2 unlimited: v1 says
    assert budget.container_limit("max\n", None) is None
    assert budget.container_limit(None, "9223372036854771712\n") is None  # v1's "no limit"
    assert budget.container_limit(None, None) is None and budget.container_limit("0", "junk") is None
    assert budget.budget_from_limit(1 << 30) == 768 * MiB  # 75% of a 1 GiB pod
    assert budget.budget_from_limit(None) == budget.DEFAULT_MEMORY_BUDGET


def test_the_cgroup_files_are_read_v2_first(tmp_path: Path) -> None:
    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    assert read_container_limit([v2, v1]) is None  # neither file: no container limit
    v1.write_text("1073741824\n")
    assert read_container_limit([v2, v1]) == 1 << 30
    v2.write_text("2147483648\n")
    assert read_container_limit([v2, v1]) == 2 << 30


def test_a_backup_adopts_a_smaller_active_budget_and_cannot_hold_a_larger_one() -> None:
    assert budget.adopted_budget(own=100, active=60) == 60
    assert budget.adopted_budget(own=100, active=100) == 100
    assert budget.adopted_budget(own=100, active=0) == 100  # the active said nothing
    assert budget.adopted_budget(own=100, active=101) is None


def _args(*extra: str) -> Any:
    return settings.parse(build_parser(), [*BASE, *extra]).args


def test_the_budget_is_a_flag_a_variable_and_a_config_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert memory_budget_of(_args("--memory-budget", "1Gi"), 4 << 30) == (1 << 30, "--memory-budget")
    assert memory_budget_of(_args(), 1 << 30) == (768 * MiB, "75% of the container's 1 GiB")
    assert memory_budget_of(_args(), None) == (768 * MiB, "no container limit")
    config = config_from_args(_args("--memory-budget", "2Gi"))
    assert config.memory_budget == 2 << 30 and config.table_budget == (2 << 30) - BASE_BYTES
    assert config.core().table_budget == config.table_budget
    monkeypatch.setenv("FEEDHA_MEMORY_BUDGET", "900Mi")
    assert _args().memory_budget == 900 * MiB
    file = tmp_path / "adapter.yaml"
    file.write_text("memory_budget: 1.5GiB\n")
    monkeypatch.delenv("FEEDHA_MEMORY_BUDGET")
    assert _args("--config", str(file)).memory_budget == int(1.5 * (1 << 30))
    with pytest.raises(SystemExit):
        _args("--memory-budget", "lots")


def test_a_budget_that_leaves_the_tables_nothing_is_refused_at_start() -> None:
    with pytest.raises(
        ConfigError, match="memory_budget: a memory budget of 200 MiB leaves the tables nothing"
    ):
        config_from_args(_args("--memory-budget", "200Mi"))
    with pytest.raises(ConfigError, match="at least 272 MiB"):
        config_from_args(_args(), container_memory=300 * MiB)  # 75%: 225 MiB


# ---- itch50: orders and stocks ----------------------------------------------------------------


def _itch_play(budget_bytes: int, messages: list[bytes], *, native: bool) -> tuple[Any, ...]:
    engine = Itch50Engine(depth=5, prefer_native=native)
    engine.state.table_budget = budget_bytes
    played, reasons = ItchPlayed(), {}
    for start in range(0, len(messages), 20):
        packet = moldudp64.encode_packet("T", start + 1, messages[start : start + 20])
        for reason, count in itch_convert(engine, packet, played).items():
            reasons[reason] = reasons.get(reason, 0) + count
    state = engine.mbo
    return reasons, played, state.digest, len(state.orders), state.snapshot(), state.charged()


def test_itch50_refuses_the_adds_past_its_budget_in_c_and_in_python_alike() -> None:
    room = 2 * ITCH50_SYMBOL_BYTES + 100 * ORDER_BYTES  # two stocks and 100 orders
    adds = [
        add_order(ref, b"B" if ref % 2 else b"S", 10, b"AAPL", 1_000_000 + ref % 7) for ref in range(1, 151)
    ]
    more = [add_order(1000 + ref, b"B", 5, b"MSFT", 2_000_000) for ref in range(5)]
    room_again = [delete(ref) for ref in range(1, 21)] + [
        add_order(2000 + r, b"S", 5, b"MSFT", 2) for r in range(12)
    ]
    names = [directory(f"N{n:03d}".encode(), locate=9) for n in range(3)]
    messages = adds + more + room_again + names
    native, reference = (_itch_play(room, messages, native=flag) for flag in (True, False))
    assert native == reference  # reasons, blocks, digests, orders and snapshot
    reasons, played, _digest, orders, snapshot, charged = native
    # AAPL and 110 orders fit (the second stock's room holds 10 orders: 1,536 // 144), 40 are refused;
    # MSFT's 5 adds pay for a stock first (96 bytes left); 20 deletes make room for MSFT and 10 of
    # its 12 orders; no room is left for a new name.
    assert ITCH50_SYMBOL_BYTES // ORDER_BYTES == 10 and ITCH50_SYMBOL_BYTES % ORDER_BYTES == 96
    assert reasons == {"memory_limit": 40 + 5 + 2 + 3}, reasons
    assert orders == 100 and sorted(snapshot) == ["AAPL", "MSFT"] and charged <= room
    assert played.from_runs > 100  # the C run took the adds that fit


def test_itch50_names_order_limit_when_max_orders_binds_first_and_memory_limit_otherwise() -> None:
    adds = [add_order(ref, b"B", 10, b"AAPL", 1_000_000) for ref in range(1, 5)]
    for room, cap, reason in ((ITCH50_SYMBOL_BYTES + 10 * ORDER_BYTES, 3, "order_limit"),
                              (ITCH50_SYMBOL_BYTES + 2 * ORDER_BYTES, 2, "memory_limit")):  # fmt: skip
        engine = Itch50Engine(max_orders=3)
        engine.state.table_budget = room
        refused = itch_convert(engine, moldudp64.encode_packet("T", 1, adds))
        assert refused == {reason: 4 - cap} and engine.mbo.order_cap == cap == len(engine.mbo.orders)


# ---- fix44: symbols and price levels ----------------------------------------------------------


def _fix44_play(budget_bytes: int, frame: bytes, *, native: bool) -> tuple[Any, ...]:
    engine = Fix44Engine(depth=5, prefer_native=native)
    engine.state.table_budget = budget_bytes
    played = Played()
    reasons = convert(engine, frame, played)
    return reasons, played, engine.state.digest, engine.state.snapshot(), engine.state.charged()


def test_fix44_refuses_a_message_whose_symbols_and_levels_pass_its_budget_in_c_and_python_alike() -> None:
    room = FIX44_SYMBOL_BYTES + 48 * LEVEL_BYTES  # AAA and 24 messages of two levels, exactly
    gone = -(-(FIX44_SYMBOL_BYTES + LEVEL_BYTES) // LEVEL_BYTES)  # the levels to delete to make room for BBB
    opening = [
        _x(1 + k, ("0", "0", "AAA", str(100 + k), "1"), ("0", "1", "AAA", str(200 + k), "1"))
        for k in range(25)
    ]
    deletes = [("2", "0", "AAA", str(100 + k), "") for k in range(gone)]
    frame = b"".join(
        opening  # the 25th would pass
        + [_x(26, ("0", "0", "BBB", "5", "1")), _x(27, ("0", "0", "CCC", "5", "1"))]  # no room for either
        + [_x(28, *deletes), _x(29, ("0", "0", "BBB", "6", "1"))]  # levels gone: room for BBB
        + [_x(30, ("2", "0", "AAA", "120", ""), ("0", "1", "AAA", "300", "1"))]  # one out, one in: taken
    )
    native, reference = (_fix44_play(room, frame, native=flag) for flag in (True, False))
    assert native == reference  # reasons, blocks, digests, snapshot, count
    reasons, played, _digest, snapshot, charged = native
    assert reasons == {"memory_limit": 3}, reasons
    assert sorted(snapshot) == ["AAA", "BBB"]
    assert charged == room - gone * LEVEL_BYTES + FIX44_SYMBOL_BYTES + LEVEL_BYTES <= room
    assert played.from_runs >= 24  # the C run takes what fits; the Python path names the refusals


# ---- feedha-fix: symbols ------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [3, 8])
def test_feedha_fix_refuses_a_new_symbol_past_its_budget_in_c_and_python_alike(seed: int) -> None:
    frames = list(_frames(seed, 600, odd=False))  # four symbols
    results = []
    for native in (True, False):
        core = _core(native=native)
        core.state.table_budget = 3 * budget.FEEDHA_FIX_SYMBOL_BYTES
        results.append(_feed(core, frames))
        assert len(core.state) == 3
    native_result, reference = results
    assert native_result == reference
    assert native_result["counters"]["quarantined"]["memory_limit"] > 20


# ---- the group --------------------------------------------------------------------------------

ITCH_ROOM = 60 * ITCH50_SYMBOL_BYTES + 400 * ORDER_BYTES  # the harness's 60 stocks and 400 orders


def test_the_group_refuses_the_same_adds_across_a_kill_and_numbers_alike() -> None:
    group = CoreGroup(3, rate=1500, itch50=True, budgets={1: ITCH_ROOM, 2: ITCH_ROOM, 3: ITCH_ROOM})
    group.run_until(lambda: group.in_sync(2) and group.in_sync(3), within=3)
    group.run(1.5)
    group.kill(1)
    group.run_until(lambda: len(group.actives()) == 1 and group.actives()[0] != 1, within=5)
    group.run(1.5)
    group.run(0.5, source=False)
    assert (group.lost, group.duplicates, group.out_of_order) == (0, 0, 0)
    counts = [group.quarantined(n) for n in (2, 3)]
    assert counts[0] == counts[1] and counts[0]["memory_limit"] > 100, counts
    states = [group.members[n].core.state for n in (2, 3)]
    assert states[0].digest == states[1].digest and len(states[0].orders) <= 400


def test_a_backup_runs_with_its_actives_budget_or_fails_when_it_cannot_hold_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    budgets = {1: ITCH_ROOM, 2: 2 * ITCH_ROOM, 3: ITCH_ROOM // 2}
    group = CoreGroup(3, rate=1500, itch50=True, budgets=budgets)
    group.run_until(lambda: group.in_sync(2), within=3)
    group.run(2.0)
    group.run(0.5, source=False)
    one, two, three = (group.members[n].core for n in (1, 2, 3))
    assert two.state.table_budget == ITCH_ROOM  # adopted down: refuses what the active refuses
    assert three.sync.role is Role.FAILED  # it could not hold what the active holds
    failed = [
        e.fields["reason"]
        for e in group.members[3].events
        if e.event == "role" and e.fields["new"] == "failed"
    ]
    assert len(failed) == 1 and "this adapter's memory budget allows" in failed[0], failed
    assert "tables' budget" in caplog.text  # adapter 2 says it adopted the active's
    assert group.quarantined(1) == group.quarantined(2) and group.quarantined(1)["memory_limit"] > 50
    assert one.state.digest == two.state.digest
    assert (group.lost, group.duplicates, group.out_of_order) == (0, 0, 0)
