"""bench.micro_itch50: every case converts all of its messages; the flood set is distinct u64s."""

from __future__ import annotations

import json

import pytest

from feedha.bench import micro_itch50


@pytest.mark.parametrize("case", ["flood", "best_run"])
def test_every_message_of_a_hostile_case_is_converted(case: str) -> None:
    data, count = micro_itch50.capture_of(case, 150)
    seconds, converted = micro_itch50.play(data)
    assert (count, converted) == (150, 150) and seconds > 0


def test_the_flood_references_are_distinct_and_fit_an_order_reference() -> None:
    refs = micro_itch50.old_hash_flood(1_000)
    assert len(set(refs)) == 1_000 and all(0 <= ref < 2**64 for ref in refs)


def test_the_benchmark_prints_each_case(capsys: pytest.CaptureFixture[str]) -> None:
    assert micro_itch50.main(["--messages", "40", "--repeat", "1", "--cases", "flood", "best_run"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["flood_converted"] == result["best_run_converted"] == 40
    assert result["flood_us_per_msg"] > 0 and "mix_us_per_msg" not in result
