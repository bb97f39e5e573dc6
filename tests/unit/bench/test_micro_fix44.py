"""bench.micro_fix44: every case converts all of its messages on the run path, and prints its JSON."""

from __future__ import annotations

import json

import pytest

from feedha.bench import micro_fix44


@pytest.mark.parametrize("case", [case for case in micro_fix44.CASES if case != "bare_recv"])
def test_every_message_of_a_case_is_converted_by_the_run(case: str) -> None:
    seconds, converted, careful = micro_fix44.run_case(case, 120, 50)
    assert converted == 120 and seconds > 0  # none was skipped: like for like
    if case in micro_fix44.CAREFUL or case == "fix44_book_full":
        # These cases measure the careful path itself: every message is sent down it.
        assert careful == converted
        return
    # Neither format leaves its run here: the fix44 C run makes a symbol's record itself.
    assert (
        careful == 0
        if case.startswith("feedha") or micro_fix44._engine(True).is_native
        else careful < converted
    )


def test_the_top_cases_run_at_depth_one() -> None:
    assert micro_fix44._engine(True, depth=micro_fix44.TOP).depth == micro_fix44.TOP == 1


def test_the_python_fix44_figures_take_every_message_through_the_python_loop() -> None:
    seconds, converted, careful = micro_fix44.run_case("fix44_mix", 120, 50, python_fix44=True)
    assert (converted, careful) == (120, 0) and seconds > 0


def test_the_benchmark_prints_each_case_and_the_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        micro_fix44.main(
            ["--messages", "60", "--repeat", "1", "--cases", "feedha_fix_one", "fix44_one", "fix44_one_top"]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["fix44_one_us_per_msg"] > 0 and result["feedha_fix_one_us_per_msg"] > 0
    assert not result["fix44_native"] or 0 < result["fix44_one_c_share"] <= 1
    for ratio, case in (("ratio_one", "fix44_one"), ("ratio_one_top", "fix44_one_top")):
        assert result[ratio] == round(result[f"{case}_us_per_msg"] / result["feedha_fix_one_us_per_msg"], 1)
