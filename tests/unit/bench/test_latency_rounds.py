"""bench latency --rounds: each percentile is the median of the rounds', every round is on record."""

from __future__ import annotations

from typing import Any

import pytest

from feedha.bench.cli import main
from feedha.bench.latency import Round, _figures, median_latency
from feedha.bench.pipeline import PipelineOptions, PipelineResult


def _latency(p50: float, p99: float, count: int = 100) -> dict[str, float]:
    return {"count": count, "p50": p50, "p99": p99, "p99.9": p99 * 2, "max": p99 * 3, "mean": p50 * 1.1}


def _result(p50: float, p99: float, *, lost: int = 0, backups: int = 1) -> PipelineResult:
    options = PipelineOptions(rate=10_000.0, seconds=1.0, latency=True, backups=backups)
    sent = 10_000
    summary: dict[str, Any] = {
        "delivered": sent - lost,
        "duplicates": 0,
        "out_of_order": 0,
        "last_source_seq": sent,
        "arbiter_lost": lost,
        "latency_us": _latency(p50, p99),
        "hops_us": {
            "source_to_publish": _latency(p50 / 2, p99 / 2),
            "publish_to_delivery": _latency(p50 / 3, p99),
        },
        "worst_latency_us": [[7, p99 * 3]],
    }
    return PipelineResult(
        options,
        sent=[sent],
        source_elapsed_s=[1.0],
        source_end_wall=[0.0],
        clients=[(0, summary)],
        source_summaries=[{"sent": sent, "publish_latency_us": {"sends": 1, "newest": {"p50": p50 / 10}}}],
    )


def _round(pipeline: tuple[float, float], relay: tuple[float, float], *, lost: int = 0) -> Round:
    return Round(
        rate=10_000.0,
        seconds=1.0,
        bare=_latency(relay[0] / 2, relay[1] / 2),
        relay=_latency(*relay),
        shape={"latency_us": _latency(relay[0] * 1.2, relay[1] * 1.2), "relays": 2, "lost": 0},
        shape_one={"latency_us": _latency(relay[0] * 1.1, relay[1] * 1.1), "relays": 1, "lost": 0},
        shape_held={
            "latency_us": _latency(relay[0] * 1.25, relay[1] * 2),
            "relays": 2,
            "lost": 0,
            "hold_s": 0.01,
            "releases": [0, 100],
        },
        pipeline=_result(*pipeline, lost=lost),
        one=_result(pipeline[0] * 0.8, pipeline[1] * 0.8, backups=0),
    )


def _by_name(figures: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in figures}


def test_each_percentile_is_the_median_of_the_rounds_and_counts_add_up() -> None:
    merged = median_latency([_latency(500, 3_000, 10), _latency(900, 2_000, 20), _latency(600, 9_000, 30)])
    assert merged["p50"] == 600 and merged["p99"] == 3_000 and merged["count"] == 60


def test_a_noisy_round_moves_the_median_less_than_it_moves_its_own_ratio() -> None:
    # Round 2 is a noisy minute for the pipeline alone: its own ratio reads 4, the median does not.
    rounds = [
        _round((600, 2_000), (400, 1_000)),
        _round((1_600, 9_000), (400, 1_100)),
        _round((560, 1_800), (410, 900)),
    ]
    figures = _by_name(_figures(rounds, size=120, quick=False, log_name="log"))
    two_hop = figures["latency_p50_two_hop"]
    assert two_hop["value"] == 600 and two_hop["ceiling"] == 400 and two_hop["ratio"] == 1.5
    assert (
        figures["latency_p99_two_hop"]["value"] == 2_000
        and figures["latency_p99_two_hop"]["ceiling"] == 1_000
    )
    one = figures["latency_p50_one_adapter"]
    assert one["value"] == 480  # 0.8 × the pipeline's median
    # over the relay's median (400), and over the model with one relay (1.1 × the relay: 440)
    assert one["ratio"] == 1.2 and one["ceiling_shape"] == 440 and one["ratio_shape"] == 1.091
    assert one["params"]["shape_one_us"]["p50"] == 440
    params = two_hop["params"]
    assert params["rounds"] == 3 and params["samples"] == 300
    assert [r["pipeline_over_relay"][0] for r in params["per_round"]] == [1.5, 4.0, 1.366]
    assert [r["one_adapter_over_shape"][0] for r in params["per_round"]] == [1.091, 2.909, 0.993]
    assert params["hops_us"]["source_to_publish"]["p50"] == 300
    assert params["source_publish_us"] == {"sends": 1, "newest": {"p50": 60.0}}  # from the median round
    assert params["worst_latency_us"] == [[7, 27_000]]  # the worst round's


def test_loss_in_any_round_is_reported() -> None:
    rounds = [_round((600, 2_000), (400, 1_000)), _round((600, 2_000), (400, 1_000), lost=3)]
    figures = _figures(rounds, size=120, quick=False, log_name="log")
    assert {f["params"]["lost"] for f in figures if "one_adapter" not in f["name"]} == {3}
    assert [r["lost"] for r in figures[0]["params"]["per_round"]] == [0, 3]


def test_one_round_keeps_the_single_run_figures_and_no_per_round_list() -> None:
    figures = _by_name(_figures([_round((700, 2_500), (350, 1_000))], size=120, quick=True, log_name="log"))
    params = figures["latency_p50"]["params"]
    assert figures["latency_p50_two_hop"]["ratio"] == 2.0 and params["rounds"] == 1
    assert "per_round" not in params


@pytest.mark.parametrize(("argv", "error"), [
    (["latency", "--rounds", "0"], "--rounds must be in 1..9"),
    (["latency", "--rounds", "10"], "--rounds must be in 1..9"),
    (["seal", "--rounds", "2"], "--rounds applies to latency only"),
])  # fmt: skip
def test_bad_rounds_are_refused_before_anything_runs(
    argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2 and error in capsys.readouterr().err


def test_the_pipeline_figures_are_also_read_over_the_held_model() -> None:
    # The held model's p50 is 1.25 x the relay's and its p99 2 x (the helper's rounds).
    rounds = [_round((600, 2_000), (400, 1_000)), _round((700, 3_000), (400, 1_000))]
    figures = _by_name(_figures(rounds, size=120, quick=False, log_name="log"))
    p50, p99 = figures["latency_p50"], figures["latency_p99"]
    assert p50["ceiling_shape_held"] == 500 and p50["ratio_shape_held"] == 1.3  # 650 / 500
    assert p99["ceiling_shape_held"] == 2_000 and p99["ratio_shape_held"] == 1.25  # 2,500 / 2,000
    assert figures["latency_p99_two_hop"]["ratio_shape_held"] == 1.25
    params = p50["params"]
    assert params["shape_held_us"]["p99"] == 2_000 and "once every 10 ms" in params["shape_held_model"]
    assert [r["pipeline_over_shape_held"] for r in params["per_round"]] == [[1.2, 1.0], [1.4, 1.5]]
    # The one adapter has no backup: its figures are read over the model with one relay only.
    assert "ratio_shape_held" not in figures["latency_p50_one_adapter"]


def test_the_report_shows_the_ratio_over_the_held_model_beside_the_shape_s() -> None:
    from feedha.bench.report import _markdown

    rounds = [_round((600, 2_000), (400, 1_000)), _round((700, 3_000), (400, 1_000))]
    text = _markdown(
        _figures(rounds, size=120, quick=False, log_name="log"), quick=False, errors=(), plots=()
    )
    rows = {
        line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| latency")
    }
    # The pipeline's p99 of 2,500 over the bare model's 1,200 and over the held model's 2,000.
    assert "| 2.083 (held 1.250) |" in rows["latency_p99"]
    assert "(held" not in rows["latency_p50_one_adapter"]
