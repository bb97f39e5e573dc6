"""bench.itch50 (``feedha bench itch50_orders``): the state's bytes per live order, all in and apart."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from feedha.adapter.conversion import choice
from feedha.bench import itch50


def test_the_measure_names_its_stocks_first_and_counts_them_apart() -> None:
    result = itch50.measure(3_000, stocks=40)
    assert result["orders"] == 3_000 and result["stocks"] == 40
    assert result["rss_bytes"] == result["stock_bytes"] + round(result["order_bytes_per_order"] * 3_000)
    assert result["bytes_per_order"] == result["rss_bytes"] / 3_000
    assert result["native_order_table"] == choice.IS_NATIVE_ORDERS_BUILT
    if choice.IS_NATIVE_ORDERS_BUILT:  # the array itself: 20-byte records, 1/2 to 3/4 full
        assert 20 * 3_000 / 0.75 <= result["order_table_bytes"] <= 20 * (3_000 / 0.5 + 127) + 100


def test_the_command_takes_a_count_of_stocks_and_refuses_nonsense() -> None:
    command = [sys.executable, "-m", "feedha.bench.itch50"]
    out = subprocess.run([*command, "500", "--stocks", "7"], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["stocks"] == 7
    refused = subprocess.run([*command, "0"], capture_output=True, text=True)
    assert refused.returncode == 2 and "must be >= 1" in refused.stderr


@pytest.mark.parametrize("flags", [["--reference"], []])
def test_both_tables_hold_what_was_added(flags: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "feedha.bench.itch50", "1000", "--stocks", "10", *flags],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    result = json.loads(out.stdout)
    assert result["orders"] == 1_000 and result["native_order_table"] == (
        not flags and choice.IS_NATIVE_ORDERS_BUILT
    )
