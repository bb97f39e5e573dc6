"""Benchmarks end to end with tiny runs: real processes on loopback, JSON figure shape (never speed)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from feedha.bench.ceiling import run_pair
from feedha.bench.cli import lost_in
from feedha.bench.common import figure, format_figure
from feedha.bench.pipeline import PipelineOptions, run_pipeline
from feedha.bench.report import load_figures, write_report
from feedha.bench.shape_run import ShapeOptions, run_shape

FIGURE_KEYS = {"name", "value", "unit", "ceiling", "ratio", "params", "machine"}
MACHINE_KEYS = {"cores", "cpu_model", "python", "pyzmq", "libzmq", "platform"}


@pytest.mark.timeout(180)
def test_tiny_pipeline_beside_the_bare_pair_prints_a_whole_figure(tmp_path: Path) -> None:
    with open(tmp_path / "components.log", "w") as log:
        bare = run_pair(count=2_000, log=log)
        result = run_pipeline(PipelineOptions(rate=0, seconds=30, count=500), log)
    assert bare["sent"] == 2_000 and bare["received"] == [2_000] and bare["lost"] == 0
    assert result.sent == [500]
    (channel, summary), *others = result.clients
    assert channel == 0 and not others
    assert summary["delivered"] == 500, summary
    assert result.lost == 0 and result.duplicates == 0, result.clients
    item = figure(
        name="throughput",
        value=result.client_rate(summary),
        unit="msg/s",
        ceiling=bare["rate"],
        params={"lost": result.lost, "messages": 500},
    )
    parsed = json.loads(format_figure(item, as_json=True))
    assert set(parsed) == FIGURE_KEYS
    assert set(parsed["machine"]) == MACHINE_KEYS
    assert parsed["name"] == "throughput" and parsed["unit"] == "msg/s"
    assert isinstance(parsed["value"], float) and isinstance(parsed["ceiling"], float)
    assert parsed["ratio"] == round(parsed["value"] / parsed["ceiling"], 3)
    assert lost_in(parsed) == 0
    report = write_report([parsed], tmp_path / "results", quick=True)
    assert "throughput" in report.read_text()
    assert load_figures(tmp_path / "results" / "figures.jsonl") == [parsed]


@pytest.mark.timeout(60)
def test_bare_pair_measures_latency_when_paced(tmp_path: Path) -> None:
    with open(tmp_path / "components.log", "w") as log:
        bare = run_pair(count=500, rate=5_000, latency=True, log=log)
    assert bare["lost"] == 0
    latency = bare["latency_us"]
    assert latency["count"] == 500
    assert set(latency) == {"count", "p50", "p99", "p99.9", "max", "mean"}
    assert latency["p50"] <= latency["p99"] <= latency["p99.9"] <= latency["max"]
    # A hop through real sockets takes microseconds: a median of 0 is a stamp taken after the send
    # (negative latencies count as 0), as a clock read after a slow import once made.
    assert latency["p50"] >= 1.0, latency


def test_a_figure_without_a_ceiling_has_no_ratio() -> None:
    item = figure(name="failover_lost", value=0, unit="msg", ceiling=None, params={"lost": 3})
    assert item["ceiling"] is None and item["ratio"] is None
    assert lost_in(item) == 3


# Slow stage: the default suite keeps CURVE lines end to end in
# test_data_plane_security.py and the pipeline's figure in the tiny pipeline above.
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_secured_pipeline_delivers_everything_over_curve(tmp_path: Path) -> None:
    with open(tmp_path / "components.log", "w") as log:
        result = run_pipeline(PipelineOptions(rate=0, seconds=30, count=500, secure=True), log)
    (_channel, summary), *_ = result.clients
    assert summary["delivered"] == 500 and result.lost == 0, summary
    # The adapters ran with keys: none of them warned that its data plane is open.
    assert "open to anyone" not in (tmp_path / "components.log").read_text()


@pytest.mark.timeout(60)
def test_the_bare_two_hop_relay_forwards_everything_and_measures_latency(tmp_path: Path) -> None:
    with open(tmp_path / "components.log", "w") as log:
        relay = run_pair(count=500, rate=5_000, latency=True, log=log, hops=2)
    assert relay["lost"] == 0 and relay["received"] == [500]
    assert relay["latency_us"]["count"] == 500
    assert relay["latency_us"]["p50"] >= 1.0, relay["latency_us"]  # two hops, never stamped late


# Slow stage (CI's `bench all --quick` runs this ramp too): the default suite keeps
# the pipeline's figure above and the bare model of the shape below.
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_production_shape_journals_on_every_adapter_and_times_each_hop(tmp_path: Path) -> None:
    options = PipelineOptions(
        rate=2_000,
        seconds=1.0,
        backups=2,
        journal=True,
        journal_root=tmp_path / "journals",
        latency=True,
        pregenerate=False,
        measure_cpu=True,
    )
    with open(tmp_path / "components.log", "w") as log:
        result = run_pipeline(options, log)
    (_channel, summary), *_ = result.clients
    assert result.lost == 0 and result.duplicates == 0 and summary["delivered"] == result.sent[0] > 0
    hops = summary["hops_us"]
    assert set(hops) == {"source_to_publish", "publish_to_delivery"}
    assert hops["source_to_publish"]["count"] == hops["publish_to_delivery"]["count"] == summary["delivered"]
    # Each hop is part of the whole: no hop's median can pass the whole's maximum.
    assert (
        max(hops["source_to_publish"]["p50"], hops["publish_to_delivery"]["p50"])
        <= summary["latency_us"]["max"]
    )
    # CPU per message of every process over the steady window, named by role.
    assert result.cpu is not None
    assert set(result.cpu["processes"]) == {"source", "active", "backup-1", "backup-2", "client"}
    assert result.cpu["messages"] > 0 and all(
        row["us_per_msg"] is not None and row["us_per_msg"] >= 0 for row in result.cpu["processes"].values()
    )
    journals = sorted((tmp_path / "journals").iterdir())
    assert len(journals) == 3  # the active and both backups journal
    for journal in journals:
        assert sum(f.stat().st_size for f in journal.glob("*.fhj")) > 64, journal  # records past the header


@pytest.mark.timeout(60)
def test_the_bare_model_of_the_shape_delivers_each_message_once_and_measures(tmp_path: Path) -> None:
    with open(tmp_path / "components.log", "w") as log:
        unpaced = run_shape(ShapeOptions(relays=2, count=3_000), log)
        paced = run_shape(
            ShapeOptions(relays=3, count=4_000, rate=4_000, latency=True, measure_cpu=True), log
        )
    assert unpaced["delivered"] == 3_000 and unpaced["duplicates"] == 3_000 and unpaced["lost"] == 0
    assert unpaced["rate"] > 0
    assert paced["delivered"] == 4_000 and paced["duplicates"] == 8_000 and paced["lost"] == 0
    assert paced["latency_us"]["count"] == 4_000
    assert set(paced["cpu"]["processes"]) == {"source", "relay-1", "relay-2", "relay-3", "client"}


@pytest.mark.timeout(60)
def test_the_held_model_s_backup_relay_forwards_everything_in_releases_on_its_beat(tmp_path: Path) -> None:
    # 3,000 messages over ~1.5 s, the backup's relay releasing every 0.1 s: ~15 releases, each
    # of many frames, and the first relay still forwarding at once (no releases).
    with open(tmp_path / "components.log", "w") as log:
        held = run_shape(ShapeOptions(relays=2, count=3_000, rate=2_000, latency=True, hold=0.1), log)
    assert held["delivered"] == 3_000 and held["duplicates"] == 3_000 and held["lost"] == 0
    first, second = held["releases"]
    assert first == 0 and 8 <= second <= 30, held["releases"]
    assert held["hold_s"] == 0.1


@pytest.mark.timeout(60)
def test_the_journaling_model_writes_and_syncs_every_frame_at_each_relay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    with open(tmp_path / "components.log", "w") as log:
        model = run_shape(ShapeOptions(relays=2, count=2_000, rate=20_000, journal=True), log)
        bare = run_shape(ShapeOptions(relays=1, count=100), log)
    assert "journaled" not in bare and model["delivered"] == 2_000 and model["lost"] == 0
    # every data frame as it came: the messages and a header a frame, at each relay alike
    first, second = model["journaled"]
    assert first == second >= 2_000 * model["size"]
    assert not any(temporary.iterdir())  # the journals go with the run


def test_replay_by_time_replays_the_whole_window_beside_its_bare_router_dealer_ceiling() -> None:
    from feedha.bench import replay_time

    (item,) = replay_time.run(quick=True)
    assert set(item) == FIGURE_KEYS and item["name"] == "replay_time" and item["unit"] == "msg/s"
    params = item["params"]
    assert params["window_messages"] == replay_time.QUICK_MESSAGES // 2 - 32  # the middle half, whole batches
    assert (
        params["replayed"] == params["ceiling_messages"] == params["window_messages"] and lost_in(item) == 0
    )


# Slow stage (CI's `bench all --quick` runs it too, and its run() asserts the agreement):
# the default suite keeps conflation's behaviour in test_conflated_access.py.
@pytest.mark.slow
def test_the_conflation_benchmark_agrees_with_its_bare_dict_and_measures_the_adapter() -> None:
    from feedha.bench import conflation

    book, adapter = conflation.run(quick=True)  # run() asserts that both closed the same intervals
    assert (
        set(book) == FIGURE_KEYS
        and book["name"] == "conflation_book"
        and book["params"]["interval_entries"] > 0
    )
    assert set(adapter) == FIGURE_KEYS and adapter["name"] == "conflation_adapter"
    params = adapter["params"]
    # 40,000 messages at 100k msg/s of the core's clock: 0.4 s, about 4 intervals of 200 symbols
    assert params["intervals"] >= 3 and params["conflated_blocks_per_interval"] > 100
    assert adapter["value"] > 0 and adapter["ceiling"] > 0 and params["bare_recv_ns_per_message"] > 0
