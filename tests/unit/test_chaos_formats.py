"""The chaos drill's captures for fix44 and itch50: their poison, their floods, what they must deliver.

The hash flood is checked against the old order table's slot function written out here from
splitmix64's finalizer (``home_of`` in ``adapter/conversion/_orders.c`` before keyed hashing):
every flood reference lands in one slot at every table size. Each poison kind is played
alone through the engine (``tests/format_fuzz.py``) and must give no block, each valid
companion message a block; the capture's count of blocks is what an engine delivers for it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest

from feedha.adapter.formats.fix44.engine import Fix44Engine
from feedha.adapter.formats.fix44.poison import POISON_KINDS as FIX44_POISON
from feedha.adapter.formats.fix44.poison import _poison as fix44_poison
from feedha.adapter.formats.itch50.engine import Itch50Engine
from feedha.adapter.formats.itch50.poison import POISON_KINDS as ITCH_POISON
from feedha.adapter.formats.itch50.poison import _poison as itch_poison
from feedha.adapter.formats.itch50.poison import colliding_refs
from feedha.drills.chaos_captures import ChaosCapture, Flood, count_blocks, write_capture
from feedha.drills.chaos_cost import CostSample, flood_costs
from feedha.drills.chaos_formats import drill_options_for, format_ok
from feedha.drills.group import DrillOptions
from feedha.proto import fix, moldudp64
from tests.format_fuzz import play_engine

MASK = (1 << 64) - 1


def _old_home(ref: int, slots: int) -> int:
    """The old ``_orders.c`` ``home_of``: splitmix64's finalizer of the reference, masked."""
    x = ref
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return (x ^ (x >> 31)) & (slots - 1)


def test_the_flood_references_share_one_slot_of_the_old_table_at_every_size() -> None:
    refs = colliding_refs(2_000)
    assert len(set(refs)) == 2_000 and all(0 <= ref <= MASK for ref in refs)
    for bits in (6, 10, 16, 20, 24, 32):
        assert {_old_home(ref, 1 << bits) for ref in refs} == {5 & ((1 << bits) - 1)}
    assert len({_old_home(ref, 1 << 48) for ref in refs}) == 2_000  # only the low 32 bits agree


def _itch_blocks(messages: list[bytes]) -> list[str]:
    engine = Itch50Engine(depth=5)
    opening = [moldudp64.encode_packet("T", 1, [_directory(b"AAAA")])]
    events = play_engine(engine, opening + [moldudp64.encode_packet("T", 2, messages)])
    return [event[0] if event[0] != "quarantine" else f"quarantine:{event[1]}" for event in events[1:]]


def _directory(stock: bytes) -> bytes:
    return (
        b"R"
        + (1).to_bytes(2, "big")
        + bytes(8)
        + stock.ljust(8)
        + b"QN"
        + (100).to_bytes(4, "big")
        + b" " * 14
    )


@pytest.mark.parametrize("kind", ITCH_POISON)
def test_each_itch50_poison_gives_no_block_and_its_companions_one_each(kind: str) -> None:
    parts = itch_poison(kind, 7, b"AAAA")
    outcomes = _itch_blocks([message for message, _is_poison in parts])
    for (_message, is_poison), outcome in zip(parts, outcomes, strict=True):
        assert (outcome != "block") == is_poison, (kind, outcomes)


@pytest.mark.parametrize("kind", FIX44_POISON)
def test_each_fix44_poison_gives_no_block_and_its_companions_one_each(kind: str) -> None:
    messages = fix44_poison(kind, 1)
    events = play_engine(Fix44Engine(depth=5), [b"".join(messages)])
    blocks = [event for event in events if event[0] == "block"]
    valid = {"max_values": 2, "volume_overflow": 1}.get(kind, 0)  # the first trade of 2**62 fits
    assert len(blocks) == valid and len(events) == len(messages), (kind, events)
    assert fix.split_messages(b"".join(messages))[1] == (kind.startswith("body_") or kind == "bad_checksum")


def _captured(input_format: str) -> ChaosCapture:
    capture = write_capture(input_format, messages=6_000, seed=3, poison_every=40)
    capture.path.unlink()
    return capture


@pytest.mark.parametrize("input_format", ["itch50", "fix44"])
def test_a_capture_holds_every_poison_kind_its_floods_and_counts_its_blocks(input_format: str) -> None:
    capture = _captured(input_format)
    kinds = ITCH_POISON if input_format == "itch50" else FIX44_POISON
    assert set(capture.poison) == set(kinds) and min(capture.poison.values()) >= 5
    assert len(capture.floods) == (2 if input_format == "itch50" else 3)
    assert capture.baseline[1] < capture.floods[0].first_seq
    for flood, after in zip(capture.floods, capture.floods[1:], strict=False):
        assert flood.first_seq <= flood.last_seq < after.first_seq
    assert capture.floods[-1].last_seq <= capture.messages
    assert 0.8 * capture.messages < capture.expected < capture.messages


def test_the_fix44_deep_book_flood_takes_the_careful_path_and_refuses_a_full_side() -> None:
    from feedha.adapter.formats.fix44.poison import _flood, _message
    from tests.unit.adapter.test_fix44_run import Played, convert

    flood = _flood("deep_book", 80)
    assert len(flood) == 180 + 80  # 9,000 levels fifty a message, then the flood itself
    engine, played = Fix44Engine(depth=10), Played()
    reasons = convert(
        engine, b"".join(_message(seq, entries) for seq, entries in enumerate(flood, 1)), played
    )
    assert reasons == {"book_full": 5}  # one in sixteen: a New on the full bid side
    values = engine.state.get("DEEP")
    assert values is not None and values.book is not None
    assert (len(values.book.bids), len(values.book.asks)) == (5_000, 4_000)
    if engine.is_native:  # one in sixteen carries non-ASCII text: the careful path converted it
        assert played.from_runs == 180 + 80 - 5 - 5


@pytest.mark.parametrize("input_format", ["fix44", "itch50"])
def test_a_seed_writes_the_same_stream_whatever_the_interpreter_s_hash_seed(input_format: str) -> None:
    code = (
        "import hashlib\n"
        "from feedha.adapter.formats.capture_registry import capture_named\n"
        f"face = capture_named({input_format!r})\n"
        "stream, _poison, _floods = face.chaos().stream(3000, seed=4, poison_every=30)\n"
        "print(hashlib.sha256(face.write(stream)).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        for hash_seed in ("1", "2", "3")
    }
    assert len(digests) == 1, digests
    assert len(digests.pop().strip()) == 64  # a digest was printed


def test_what_a_capture_must_deliver_is_what_an_engine_delivers_for_it() -> None:
    from feedha.adapter.formats.itch50.poison import itch50_stream

    stream, _poison, _floods = itch50_stream(3_000, seed=4, poison_every=30)
    packets = [moldudp64.encode_packet("T", at + 1, stream[at : at + 7]) for at in range(0, len(stream), 7)]
    events = Counter(event[0] for event in play_engine(Itch50Engine(depth=10), packets))
    assert count_blocks("itch50", iter(packets)) == events["block"] > 0


def _samples(costs: list[tuple[int, float]]) -> list[CostSample]:
    """Two processes, sampled at each (position, µs a message since the last sample)."""
    out, cpu = [], {1: 0.0, 2: 0.0}
    for position, micros in costs:
        for pid in (1, 2):
            if out:
                cpu[pid] += micros * 1e-6 * 100
            out.append(CostSample(pid, cpu[pid], position))
    return out


def test_the_cost_of_a_message_is_compared_before_and_during_each_flood() -> None:
    samples = _samples(
        [(seq, 10.0 if seq <= 1000 else 50.0 if seq <= 2000 else 15.0) for seq in range(0, 3001, 100)]
    )
    report = flood_costs(samples, [Flood("slow", 1001, 2000), Flood("mild", 2001, 3000)], (100, 1000))
    assert report["slow"] == {
        "before_us": 10.0,
        "during_us": 50.0,
        "ratio": 5.0,
        "messages": [1800, 1800],
        "held": False,
    }
    assert report["mild"]["ratio"] == 1.5 and report["mild"]["held"] is True
    assert flood_costs([], [Flood("none", 1, 2)], (1, 1))["none"]["held"] is False  # unmeasured: not held


def test_a_format_run_plays_its_capture_and_fails_unless_every_flood_held(tmp_path: Any) -> None:
    capture = ChaosCapture(tmp_path / "c", "itch50", 10_000, 9_000)
    options = drill_options_for(DrillOptions(rate=5000.0, seconds=1.0), capture)
    assert options.seconds == 2.0 and options.extra_adapter_args[:2] == ["--format", "itch50"]
    assert options.extra_source_args[:4] == ["--file", str(tmp_path / "c"), "--format", "itch50"]
    result = {"format": "itch50", "max_rss_mib": {"1": 90.0}, "honest_rate": {"f": {"held": True}}}
    assert format_ok(result)
    assert not format_ok({**result, "honest_rate": {"f": {"held": False}}})
    assert not format_ok({**result, "max_rss_mib": {"1": 2048.0}})
    assert format_ok({"max_rss_mib": {"1": 2048.0}})  # feedha-fix: no floods, no bound of its own
