"""feedha bench itch50_day end to end on a small day: real processes, the figure's shape (never speed)."""

from __future__ import annotations

import json

import pytest

from feedha.bench import cli


# Slow (9 s alone, more on a loaded machine, and CI's default suite is nearly full: an active,
# two backups, a source and a client, then the bare model twice and a fresh process for the
# state's memory). The default suite keeps the parts: the day's capture, the command line and
# the unpaced CPU window (tests/unit/bench/test_itch50_day.py), the books against itch-book
# (tests/unit/adapter/test_itch50_vs_itch_book.py) and the pipeline harness (test_bench_smoke.py).
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_small_day_is_played_whole_and_its_books_equal_itch_books(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["itch50_day", "--messages", "8000", "--json"]) == 0
    item = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    params = item["params"]
    assert item["name"] == "itch50_day" and item["unit"] == "msg/s" and item["value"] > 0
    assert item["ratio_shape"] == round(item["value"] / item["ceiling_shape"], 3)
    assert params["messages"] == params["sent"] == params["delivered"] == params["active_journaled"] == 8000
    assert params["lost"] == 0 and params["duplicates"] == 0
    assert params["books_equal"] and params["books_compared"] > 500 and params["books_differ"] == []
    assert params["itch_book_stats"]["messages"] == 8000 and params["itch_book_msgs_per_s"] > 0
    assert set(params["cpu"]["processes"]) == {"source", "active", "backup-1", "backup-2", "client"}
    assert params["active_us_per_msg"] > 0 and params["active_over_itch_book"] > 0
    assert params["live_orders"] == params["itch_book_stats"]["live_orders"] > 0
    assert params["bytes_per_live_order"] > 0 and params["stock_bytes"] > 0  # the day's 2,000 stocks named
    assert params["bytes_per_live_order_without_stocks"] < params["bytes_per_live_order"]
