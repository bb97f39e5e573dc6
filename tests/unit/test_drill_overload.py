"""The overload drill's schedule and backlog figures (feedha/drills/overload.py), on made-up samples."""

from __future__ import annotations

import pytest

from feedha.drills.overload import OverloadOptions, backlog_figures, capacity_of, due_at, verdict
from feedha.procs import ProcessError


def test_the_schedule_plays_the_burst_then_the_calm_rate_and_stops_at_the_capture_s_end() -> None:
    due = [
        due_at(t, count=100, burst_rate=30.0, burst_s=2.0, calm_rate=5.0)
        for t in (0, 0.5, 1.99, 2.0, 4.0, 99)
    ]
    assert due == [0, 16, 60, 61, 71, 100]


def test_the_backlog_s_peak_and_the_time_to_catch_up_and_to_drain() -> None:
    # (t, due, client position): the backlog grows in the burst (ends at 10 s), then shrinks.
    samples = [
        (0.0, 0, 0),
        (5.0, 150, 50),
        (10.0, 300, 100),
        (15.0, 325, 250),
        (20.0, 350, 348),
        (25.0, 360, 360),
    ]
    figures = backlog_figures(samples, burst_s=10.0, calm_rate=5.0)
    assert figures == {"backlog_peak": 200, "backlog_peak_at_s": 10.0, "catch_up_s": 10.0, "drained_s": 15.0}
    never = backlog_figures(samples[:4], burst_s=10.0, calm_rate=5.0)  # the capture ended in the backlog
    assert never["catch_up_s"] is None and never["drained_s"] == 5.0
    assert backlog_figures([], burst_s=10.0, calm_rate=5.0)["backlog_peak"] == 0


def test_options_name_a_bad_value() -> None:
    with pytest.raises(ValueError, match="kill-after"):
        OverloadOptions(file="x", kill_after_s=10.0)  # type: ignore[arg-type]  # not in the burst
    with pytest.raises(ValueError, match="capacity"):
        OverloadOptions(file="x", capacity=0.0)  # type: ignore[arg-type]


def test_the_verdict_names_each_check_a_summary_fails() -> None:
    good = {
        "lost": 0,
        "unaccounted": 0,
        "conflicts": 0,
        "reference": {"books_equal": True, "stats_equal": True},
    }
    assert verdict(good) == []
    assert verdict({**good, "lost": 3, "unaccounted": -1}) == ["lost", "unaccounted"]
    assert verdict({**good, "reference": {"books_equal": False, "stats_equal": True}}) == ["books_equal"]
    assert verdict({"lost": 0, "unaccounted": 0, "conflicts": 0}) == []  # --no-reference: books not judged


def test_capacity_is_the_client_s_pace_after_the_warm_up_up_to_its_last_move() -> None:
    # Nothing for 1 s, 2 s of warm-up, then 1,000 a second until 6 s; flat after (the run's tail).
    points = [
        (0.0, 0),
        (1.0, 10),
        (2.0, 500),
        (3.0, 1000),
        (4.0, 2000),
        (5.0, 3000),
        (6.0, 4000),
        (7.0, 4000),
    ]
    assert capacity_of(points) == 1000.0
    assert capacity_of([(0.0, 100), (0.5, 600)]) == 1000.0  # shorter than the warm-up: what there is
    for nothing in ([], [(0.0, 0), (1.0, 0)], [(0.0, 50), (1.0, 50)]):
        with pytest.raises(ProcessError, match="--capacity"):
            capacity_of(nothing)
