"""The sealing benchmark in quick mode: figure shapes and the bare pair beside them (never speed)."""

from __future__ import annotations

import json

import pytest

from feedha.bench import seal as bench_seal
from feedha.bench.cli import BENCHMARKS
from feedha.bench.common import format_figure


def test_packets_are_typical_and_small() -> None:
    typical, messages = bench_seal._packets(10, None)
    assert len(typical) == 10 and 70 <= messages / 10 <= 100  # ~80 updates in 8 KiB
    assert all(8_000 <= len(packet) <= 8_192 for packet in typical)
    small, messages = bench_seal._packets(10, 1)
    assert messages == 10


@pytest.mark.timeout(60)
def test_quick_run_prints_cost_and_rate_figures_beside_the_bare_pair() -> None:
    assert BENCHMARKS["seal"] == ("feedha.bench.seal", "run")
    figures = [json.loads(format_figure(item, as_json=True)) for item in bench_seal.run(quick=True)]
    shapes = {(item["name"], item["unit"], item["params"]["packet"]) for item in figures}
    assert shapes == {
        (name, unit, packet)
        for packet in ("typical", "small")
        for name, unit in [
            ("seal_seal_cost", "ns/packet"),
            ("seal_seal_cost", "ns/msg"),
            ("seal_open_cost", "ns/packet"),
            ("seal_open_cost", "ns/msg"),
            ("seal_rate", "msg/s"),
        ]
    }
    for item in figures:
        assert (
            item["value"] > 0
            and item["ceiling"]
            and item["ratio"] == pytest.approx(item["value"] / item["ceiling"], rel=0.01, abs=0.002)
        )
        assert item["params"]["ceiling_lost"] == 0
