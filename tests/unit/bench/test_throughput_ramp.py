"""The throughput ramp: the pipeline and the bare model of its shape are measured the same way."""

from __future__ import annotations

from feedha.bench.throughput import RAMP_FACTOR, _ramp_rates, _Step


def _capacity(limit: float, *, source_limit: float = float("inf")) -> tuple[list[float], object]:
    offered: list[float] = []

    def step(rate: float) -> _Step:
        offered.append(rate)
        achieved = min(rate, source_limit)
        ok = rate <= limit
        return _Step(rate, ok, achieved if ok else 0.0, achieved, {"rate": rate, "sustained": ok}, None)

    return offered, step


def test_the_ramp_finds_the_highest_sustained_rate_within_its_resolution() -> None:
    for limit in (12_000.0, 57_000.0, 240_000.0, 1_300_000.0):
        offered, step = _capacity(limit)
        ramp = _ramp_rates(step, start_rate=10_000.0, budget_s=60.0)  # type: ignore[arg-type]
        assert ramp.best is not None and ramp.best.sustained
        assert ramp.value <= limit < ramp.value * RAMP_FACTOR  # the next step up would fail
        assert limit / ramp.value < 1.15  # bisected until a failed step was this close above
        assert [s["rate"] for s in ramp.steps] == offered


def test_a_ramp_that_starts_too_high_comes_down_and_one_whose_source_tops_out_stops() -> None:
    offered, step = _capacity(5_000.0)
    ramp = _ramp_rates(step, start_rate=40_000.0, budget_s=60.0)  # type: ignore[arg-type]
    assert offered[0] == 40_000.0 and ramp.value <= 5_000.0 and ramp.best is not None
    offered, step = _capacity(1e9, source_limit=300_000.0)
    ramp = _ramp_rates(step, start_rate=100_000.0, budget_s=60.0)  # type: ignore[arg-type]
    assert ramp.best is not None and ramp.best.source_rate == 300_000.0
    assert offered[-1] > 300_000.0 / 0.95  # it stopped at the first step the source could not keep up with
