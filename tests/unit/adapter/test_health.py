"""The health score and the meter that samples it: explicit figures and times."""

from __future__ import annotations

from feedha.adapter.core.health import (
    LAG_WINDOW_SAMPLES,
    HealthMeter,
    HealthSample,
    MachineSample,
    health_score,
)


def _sample(**changes: float) -> HealthSample:
    figures = {
        "available_memory_mb": 4096.0,
        "cpu_percent": 0.0,
        "error_count": 0,
        "message_rate": 0.0,
        "lag": 0,
    }
    figures.update(changes)
    return HealthSample(**figures)  # type: ignore[arg-type]


def test_a_healthy_idle_adapter_scores_full_marks() -> None:
    assert health_score(_sample()) == 100.0


def test_converting_slower_than_the_group_lowers_the_score() -> None:
    keeping_up = health_score(_sample(message_rate=10_000.0, group_rate=10_000.0))
    half = health_score(_sample(message_rate=5_000.0, group_rate=10_000.0))
    assert keeping_up == 100.0 and half == 90.0
    # Below 100 msg/s in the group, rates say nothing.
    assert health_score(_sample(message_rate=0.0, group_rate=50.0)) == 100.0


def test_the_meter_counts_errors_in_a_sliding_window_and_measures_the_rate() -> None:
    meter = HealthMeter(penalty=0.0, now=0.0, error_window_s=10.0)
    meter.on_machine_sample(MachineSample(available_memory_mb=1024.0, cpu_percent=50.0))
    first = meter.measure(now=1.0, numbered=1000, errors=5, lag=0, group_rate=0.0)
    assert first.error_count == 5 and first.message_rate == 1000.0 and first.cpu_percent == 50.0
    for t in range(2, 12):
        sample = meter.measure(now=float(t), numbered=1000 + 500 * (t - 1), errors=5, lag=0, group_rate=0.0)
    assert sample.message_rate == 500.0
    assert sample.error_count == 0  # the burst at t=1 is older than the window now
    later = meter.measure(now=12.0, numbered=6000, errors=8, lag=0, group_rate=0.0)
    assert later.error_count == 3


def test_a_sample_without_a_memory_figure_keeps_the_last_one() -> None:
    meter = HealthMeter(penalty=0.0, now=0.0)
    meter.on_machine_sample(MachineSample(available_memory_mb=1024.0, cpu_percent=50.0))
    meter.on_machine_sample(MachineSample(available_memory_mb=None, cpu_percent=20.0))
    sample = meter.measure(now=1.0, numbered=0, errors=0, lag=0, group_rate=0.0)
    assert (sample.available_memory_mb, sample.cpu_percent) == (1024.0, 20.0)


def test_a_moments_lag_costs_nothing_and_a_lasting_one_counts_once_it_fills_the_window() -> None:
    meter = HealthMeter(penalty=0.0, now=0.0)

    def lag_at(t: int, lag: int) -> int:
        sample = meter.measure(now=t / 10, numbered=0, errors=0, lag=lag, group_rate=0.0)
        assert sample.lag == meter.lag
        return sample.lag

    # A backup that keeps up: a batch it has not read yet, now and then, is no lag.
    assert [lag_at(t, lag) for t, lag in enumerate([0, 3_000, 0, 0, 2_000, 0], start=1)] == [0] * 6
    # One that cannot keep up is behind in every sample: it counts once the window is full of it.
    lags = [lag_at(t, 500 + 100 * t) for t in range(7, 7 + LAG_WINDOW_SAMPLES)]
    assert lags[:-1] == [0] * (LAG_WINDOW_SAMPLES - 1) and lags[-1] == 1_200
    assert health_score(_sample(lag=lags[-1])) == 88.0
    # Caught up: the next reading clears it.
    assert lag_at(20, 0) == 0


def test_only_the_lag_beyond_what_every_backup_shares_counts() -> None:
    # A burst the source outran every adapter with: both backups 3,000 behind the active.
    assert health_score(_sample(lag=3_000, group_lag=3_000)) == 100.0
    assert health_score(_sample(lag=3_500, group_lag=3_000)) == 95.0  # the slower one: 500 of its own
    meter = HealthMeter(penalty=0.0, now=0.0)
    for t in range(1, LAG_WINDOW_SAMPLES + 1):
        shared = meter.measure(now=t / 10, numbered=0, errors=0, lag=3_000, group_rate=0.0, peer_lags=[2_800])
    assert (shared.lag, shared.group_lag) == (3_000, 2_800) and health_score(shared) == 98.0
    alone = meter.measure(now=1.0, numbered=0, errors=0, lag=3_000, group_rate=0.0)
    assert alone.group_lag == 3_000 and health_score(alone) == 100.0  # the last backup shares it with nobody
    ahead = meter.measure(now=1.1, numbered=0, errors=0, lag=3_000, group_rate=0.0, peer_lags=[-10_000])
    assert ahead.group_lag == 3_000  # a peer far ahead shares no lag: the least of the absolute lags
