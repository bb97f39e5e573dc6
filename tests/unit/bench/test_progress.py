"""``feedha bench``'s progress: a bar on a terminal, lines in a log, nothing with --json."""

from __future__ import annotations

import io
import json

import pytest

from feedha.bench import cli
from feedha.bench.progress import Progress, render

pytestmark = pytest.mark.timeout(60)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_render_shares_time_by_expected_durations():
    line = render("latency", 2, 3, done_s=10.0, elapsed_s=15.0, expected_s=10.0, whole_s=40.0)
    assert line.startswith("feedha bench [2/3] latency ")
    assert "[#########...............]" in line and "38%" in line and "0:15 of ~0:40" in line
    # Longer than expected: it holds short of its whole share until it ends.
    late = render("latency", 2, 3, done_s=10.0, elapsed_s=100.0, expected_s=10.0, whole_s=40.0)
    assert "50%" in late and "1:40 of ~1:40" in late


def _fake_benchmarks(monkeypatch):
    figure = {"name": "x", "value": 1.0, "unit": "msg/s", "params": {}}
    module = type("M", (), {"run": staticmethod(lambda quick: [dict(figure, name="a")])})
    broken = type("B", (), {"run": staticmethod(lambda quick: 1 / 0)})
    monkeypatch.setitem(__import__("sys").modules, "fake_bench_ok", module)
    monkeypatch.setitem(__import__("sys").modules, "fake_bench_broken", broken)
    monkeypatch.setattr(
        cli, "BENCHMARKS", {"ok": ("fake_bench_ok", "run"), "broken": ("fake_bench_broken", "run")}
    )
    monkeypatch.setattr(
        cli, "format_figure", lambda item, as_json: json.dumps(item) if as_json else item["name"]
    )


def test_a_log_gets_one_line_per_benchmark_and_json_gets_nothing(monkeypatch, capsys, tmp_path):
    _fake_benchmarks(monkeypatch)
    monkeypatch.setattr("feedha.bench.report.write_report", lambda *a, **k: tmp_path / "report.md")
    assert cli.main(["all", "--results", str(tmp_path)]) == 1  # one crashed
    err = capsys.readouterr().err
    assert (
        "[1/2] ok ..." in err
        and "ok done in" in err
        and "[2/2] broken ..." in err
        and "broken crashed" in err
    )
    assert cli.main(["ok", "--json", "--results", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and json.loads(captured.out)["name"] == "a"
    # The durations are remembered for the next estimate.
    assert "ok" in json.loads((tmp_path / ".durations.json").read_text())["full"]


def test_a_terminal_gets_a_bar_redrawn_in_place(tmp_path):
    stream = _Terminal()
    progress = Progress(["one", "two"], stream=stream, enabled=True, quick=True, memory=tmp_path / "d.json")
    progress.start("one")
    progress.finish("one", ok=True)
    progress.start("two")
    progress.finish("two", ok=True)
    progress.close()
    text = stream.getvalue()
    assert "\r\x1b[Kfeedha bench [1/2] one" in text and "[2/2] two" in text
    assert text.endswith("\r\x1b[K")  # the bar is gone when the run ends
    assert set(json.loads((tmp_path / "d.json").read_text())["quick"]) == {"one", "two"}
