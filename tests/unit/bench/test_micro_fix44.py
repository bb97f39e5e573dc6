"""bench.micro_fix44: every case converts all of its messages on the run path, and prints its JSON."""

from __future__ import annotations

import json

import pytest

from feedha.bench import micro_fix44


@pytest.mark.parametrize("case", ["feedha_fix_one", "fix44_one", "feedha_fix_mix", "fix44_mix", "fix44_deep"])
def test_every_message_of_a_case_is_converted_by_the_run(case: str) -> None:
    seconds, converted = micro_fix44.run_case(case, 120, 50)
    assert converted == 120 and seconds > 0  # none fell to the careful path: like for like


def test_the_benchmark_prints_each_case_and_the_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        micro_fix44.main(["--messages", "60", "--repeat", "1", "--cases", "feedha_fix_one", "fix44_one"]) == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["fix44_one_us_per_msg"] > 0 and result["feedha_fix_one_us_per_msg"] > 0
    assert result["ratio_one"] == round(
        result["fix44_one_us_per_msg"] / result["feedha_fix_one_us_per_msg"], 1
    )
