"""bench.table_bytes: each case fills its table through the adapter's state and says what it added."""

from __future__ import annotations

import pytest

from feedha.bench import table_bytes


@pytest.mark.parametrize("case", table_bytes.CASES)
def test_every_case_adds_what_it_says_and_measures_it(case: str) -> None:
    result = table_bytes.measure(case, 2_000)
    assert result["case"] == case and result["added"] >= 1_000
    assert isinstance(result["rss_bytes"], int) and result["bytes_each"] == round(
        result["rss_bytes"] / result["added"], 1
    )
