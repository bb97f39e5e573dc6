"""The ``feedha bench all`` report: a markdown summary, the raw figures and PNG plots.

Writes into the results folder (default ``results/``, git-ignored):

* ``figures.jsonl``: every figure, one JSON object per line, as printed;
* ``REPORT.md``: a table per benchmark (value, ceiling, ratio, key parameters);
* ``*.png``: one plot per benchmark (matplotlib, Agg backend), each beside its ceiling.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from feedha.bench.common import Figure, machine

_KEY_PARAMS = (
    "offered_rate",
    "rate",
    "subscribers",
    "subscribed_symbols",
    "channels",
    "lost",
    "duplicates",
    "kept",
    "sent",
    "ratio_shape_journal",  # the journal shape over the journaling model (bench.throughput)
)


def _group(figures: Sequence[Figure]) -> dict[str, list[Figure]]:
    groups: dict[str, list[Figure]] = defaultdict(list)
    for item in figures:
        groups[item["name"].split("_")[0]].append(item)
    return groups


def _markdown(figures: Sequence[Figure], *, quick: bool, errors: Sequence[str], plots: Sequence[str]) -> str:
    info = machine()
    lines = [
        "# feedha benchmark report",
        "",
        f"{'Quick (smoke) run' if quick else 'Full run'} on {info['cores']} cores ({info['cpu_model']}), "
        f"Python {info['python']}, pyzmq {info['pyzmq']}, libzmq {info['libzmq']}.",
        "",
        "Every figure is measured beside its ceiling in the same run: the bare pyzmq PUB→SUB pair "
        "on loopback (100-byte messages, one ZeroMQ message each). For throughput figures `ratio` is "
        "value / ceiling (higher is better); for latency figures it is how many times the bare hop's "
        "latency (lower is better). `ratio (shape)` divides by the bare model of the pipeline's own "
        "shape (a source, a relay per adapter, a client reading every line), measured in the same run; "
        "`held` divides a latency by the same model whose backups' relays forward once a heartbeat "
        "interval, as a backup's output gate releases. "
        "Absolute figures on a shared 2-core machine are noisy; the ratios are the comparable part.",
        "",
    ]
    if errors:
        lines += ["## Errors", "", *[f"- {error}" for error in errors], ""]
    for group, items in _group(figures).items():
        lines += [
            f"## {group}",
            "",
            "| name | value | unit | ceiling | ratio | ratio (shape) | parameters |",
            "|---|---:|---|---:|---:|---:|---|",
        ]
        for item in items:
            params = item["params"]
            shown = ", ".join(f"{k}={params[k]}" for k in _KEY_PARAMS if k in params)
            ceiling = "–" if item["ceiling"] is None else f"{item['ceiling']:,.1f}"
            ratio = "–" if item["ratio"] is None else f"{item['ratio']:.3f}"
            shape = "–" if item.get("ratio_shape") is None else f"{item['ratio_shape']:.3f}"
            if item.get("ratio_shape_held") is not None:
                shape += f" (held {item['ratio_shape_held']:.3f})"
            lines.append(
                f"| {item['name']} | {item['value']:,.1f} | {item['unit']} | {ceiling} | {ratio} | {shape} "
                f"| {shown} |"
            )
        lines.append("")
        for plot in plots:
            if plot.startswith(group):
                lines += [f"![{group}]({plot})", ""]
    return "\n".join(lines)


def _plots(figures: Sequence[Figure], folder: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made: list[str] = []
    groups = _group(figures)

    def draw(name: str, plot: Callable[..., None], *args: Any) -> None:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        plot(ax, *args)
        fig.tight_layout()
        fig.savefig(folder / f"{name}.png", dpi=100)
        plt.close(fig)
        made.append(f"{name}.png")

    if "throughput" in groups:
        draw("throughput", _throughput_plot, groups["throughput"][0])
    for name, key, xlabel, ylabel in _BAR_PLOTS:
        if name in groups:
            draw(name, _bar_plot, name, key, xlabel, groups[name], ylabel)
    if "latency" in groups:
        draw("latency", _latency_plot, groups["latency"])
    if "failover" in groups:
        draw("failover", _failover_plot, groups["failover"])
    return made


# name, the parameter on the x axis, its label, the y axis's label: feedha beside bare pyzmq.
_BAR_PLOTS: Final = (
    ("fanout", "subscribers", "subscribers", "msg/s per subscriber"),
    ("symbols", "subscribed_symbols", "symbols kept (of 5,000)", "msg/s"),
    ("channels", "channels", "channels", "total msg/s"),
)


def _bar_plot(ax: Any, name: str, key: str, xlabel: str, items: list[Figure], ylabel: str) -> None:
    labels = [str(item["params"].get(key)) for item in items]
    x = range(len(items))
    ax.bar([i - 0.2 for i in x], [item["value"] for item in items], width=0.4, label="feedha")
    ax.bar([i + 0.2 for i in x], [item["ceiling"] or 0 for item in items], width=0.4, label="bare pyzmq")
    ax.set_xticks(list(x), labels)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(name)
    ax.legend()


def _throughput_plot(ax: Any, item: Figure) -> None:
    steps = item["params"].get("steps", [])
    ax.plot([s["rate"] for s in steps], [s["delivered_rate"] for s in steps], "o-", label="delivered")
    ax.plot([s["rate"] for s in steps], [s["rate"] for s in steps], "--", label="offered")
    if item["ceiling"]:
        ax.axhline(item["ceiling"], color="grey", linestyle=":", label="bare pyzmq ceiling")
    for step in steps:
        if not step["sustained"]:
            ax.plot(step["rate"], step["delivered_rate"], "rx")
    ax.set_xlabel("offered msg/s")
    ax.set_ylabel("delivered msg/s")
    ax.set_title("throughput ramp (x: not sustained)")
    ax.legend()


def _latency_plot(ax: Any, items: list[Figure]) -> None:
    by_rate: dict[float, dict[str, Figure]] = defaultdict(dict)
    for item in items:
        by_rate[item["params"]["rate"]][item["name"].removeprefix("latency_")] = item
    for pct in ("p50", "p99", "p99.9"):
        rates = sorted(r for r in by_rate if pct in by_rate[r])
        ax.plot(rates, [by_rate[r][pct]["value"] for r in rates], "o-", label=f"feedha {pct}")
        ax.plot(rates, [by_rate[r][pct]["ceiling"] or 0 for r in rates], "x--", label=f"bare {pct}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("msg/s")
    ax.set_ylabel("one-way latency, µs")
    ax.set_title("latency")
    ax.legend(fontsize=7)


def _failover_plot(ax: Any, items: list[Figure]) -> None:
    gaps = [item for item in items if item["name"] == "failover_switch_gap"]
    ax.bar([str(item["params"]["rate"]) for item in gaps], [item["value"] for item in gaps])
    ax.set_xlabel("msg/s")
    ax.set_ylabel("longest delivery pause, ms")
    ax.set_title("failover switch gap")


def write_report(figures: Sequence[Figure], folder: Path, *, quick: bool, errors: Sequence[str] = ()) -> Path:
    """Write ``figures.jsonl``, the PNG plots and ``REPORT.md`` into ``folder``.

    Args:
        figures: every figure of the run.
        folder: the results folder (created if missing).
        quick: whether this was a ``--quick`` run (said in the report).
        errors: benchmarks that crashed, with their error.

    Returns:
        The path of ``REPORT.md``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "figures.jsonl", "w", encoding="utf-8") as file:
        for item in figures:
            file.write(json.dumps(item, sort_keys=True) + "\n")
    plots: list[str] = []
    try:
        plots = _plots(figures, folder)
    except Exception as exc:  # noqa: BLE001 - a plot must never lose the figures
        errors = [*errors, f"plots: {exc!r}"]
    report = folder / "REPORT.md"
    report.write_text(_markdown(figures, quick=quick, errors=errors, plots=plots) + "\n", encoding="utf-8")
    return report


def load_figures(path: Path) -> list[dict[str, Any]]:
    """Read a ``figures.jsonl`` back (to re-plot a run)."""
    with open(path, encoding="utf-8") as file:
        return [json.loads(line) for line in file if line.strip()]
