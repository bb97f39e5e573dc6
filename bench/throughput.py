"""Throughput benchmark: the highest sustained delivered rate of the pipeline, in three shapes.

``throughput`` ramps the source rate (short steps, each a fresh pipeline,
:func:`bench.pipeline.run_pipeline`) and reports the highest step that was
*sustained*: 0 lost, every sent message delivered, and the client done within
a small drain allowance after the source stopped (with unbounded high-water
marks, overload shows as a growing queue, not as loss). Its ceiling is the
bare pyzmq PUB→SUB pair (:mod:`bench.ceiling`) measured in the same run (best
of two, one before and one after the ramp, so a loaded machine lowers the
ratio rather than flattering it), and beside the bare model of each ramp's
own shape (:mod:`bench.shape`), with each process's CPU per message
(:mod:`bench.cpu`); see :func:`run`.

The bare model
--------------
Each figure's ``ceiling_shape`` is the same figure of the bare model of
its shape (:mod:`bench.shape`: a source, one relay per adapter, a client
reading every line and keeping the first copy; messages of the plain
source's mean size in frames of what is due, at most 64; its source
niced as the pipeline's is): the highest paced rate it sustained on the
same ramp, with the same test (nothing lost, everything delivered, the
drain allowance), run once per relay count after the pipeline's ramps
and starting a step below the best pipeline rate of that count;
``ratio_shape`` is the sustained rate over it. The model's unpaced burst
(a fixed count sent as fast as its source can into unbounded queues, the
faster of one run before and one after the ramps) is
``ceiling_shape_unpaced`` in the parameters: not the same measure (no
pacing, nothing bounded), kept for reference. The CURVE ramp is compared
with the open model. The journaling ramp is also read against a model
whose relays journal as well (a bare journal: every frame written and
synced once per group commit, nothing of feedha's format):
``ceiling_shape_journal`` and ``ratio_shape_journal`` in its parameters,
from a ramp of that model run like the others. ``cpu`` in
the parameters is each process's CPU per message over the steady window
of the best step (source, active, each backup, client), beside the bare
model's (source, each relay, client) paced at the same rate right after
the ramp, and their quotients (``over_shape``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from feedha.bench.capture import CAPTURE_DESCRIPTION, CAPTURE_MESSAGES, write_capture
from feedha.bench.common import Figure, figure
from feedha.bench.cpu import compare
from feedha.bench.itch50 import ITCH_CAPTURE_DESCRIPTION, ITCH_CAPTURE_ORDERS, write_itch_capture
from feedha.bench.pipeline import (
    CEILING_COUNT,
    HEARTBEAT_TIMEOUT_S,
    QUICK_CEILING_COUNT,
    SOURCE_BATCHING,
    PipelineOptions,
    PipelineResult,
    ceiling,
    mean_source_bytes,
    open_log,
    run_pipeline,
)
from feedha.bench.shape_run import ShapeOptions, run_shape

RAMP_START: Final = 10_000.0
# fix44 converts in C (adapter/formats/fix44/_fix44_run.c): started at 1,500, --quick's 45 s
# ramp ended at 38,443 msg/s with every step sustained (a figure of the budget, not the pipeline).
FIX44_RAMP_START: Final = RAMP_START
ITCH50_RAMP_START: Final = 1_500.0  # the itch50 engine's ramp starts lower
RAMP_FACTOR: Final = 1.5
STEP_S: Final = 3.0
QUICK_STEP_S: Final = 1.5
RAMP_BUDGET_S: Final = 150.0
QUICK_RAMP_BUDGET_S: Final = 45.0
BISECT_RESOLUTION: Final = 1.05  # a sustained step this close below a failed one ends the ramp
DRAIN_ALLOWANCE_S: Final = 0.25  # the client may finish this long after the source (queueing, not overload)


def _sustained(result: PipelineResult) -> bool:
    s = result.clients[0][1]
    return (
        result.lost == 0
        and result.duplicates == 0
        and s["delivered"] >= result.sent[0]
        and result.drain_s() <= DRAIN_ALLOWANCE_S
    )


@dataclass(frozen=True)
class _Step:
    """One step of a ramp: whether it was sustained, its delivered rate, what the source achieved."""

    rate: float  # offered, msg/s
    sustained: bool
    delivered_rate: float
    source_rate: float
    record: dict[str, Any]
    result: Any  # the step's PipelineResult, or the bare model's run_shape dict


@dataclass
class _Ramp:
    """One ramp of the source rate: every step, and the best sustained one."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    best: _Step | None = None

    @property
    def value(self) -> float:
        """The best sustained step's delivered rate (0.0 when no step was sustained)."""
        return 0.0 if self.best is None else self.best.delivered_rate

    def params(self) -> dict[str, Any]:
        best = None if self.best is None else self.best.result
        return {
            "failovers": None if best is None else best.failovers,
            "offered_rate": None if best is None else best.options.rate,
            "lost": 0 if best is None else best.lost,
            "steps": self.steps,
        }


@dataclass(frozen=True, kw_only=True)
class Shape:
    """What a ramp's pipelines look like besides the rate.

    Attributes:
        backups: backups per group besides the active.
        secure: CURVE on the lines and the sync bus.
        journal: journals (``--fsync batch``) and replay services on every adapter.
    """

    backups: int = 1
    secure: bool = False
    journal: bool = False
    capture: Path | None = None
    capture_format: str = "fix44"
    start_rate: float = RAMP_START  # the ramp's first step (msg/s)

    def describe(self) -> str:
        keys = "CURVE on lines and sync bus" if self.secure else "open data plane"
        journals = "journals with --fsync batch" if self.journal else "no journal"
        source = (
            ""
            if self.capture is None
            else ", a fix44 capture (--format fix44, order books)"
            if self.capture_format == "fix44"
            else ", an ITCH 5.0 capture as MoldUDP64 packets (--format itch50, market-by-order books)"
        )
        return f"active + {self.backups} backup(s), {keys}, {journals}{source}"


def _ramp_rates(step: Callable[[float], _Step], *, start_rate: float, budget_s: float) -> _Ramp:
    """Raise the rate by RAMP_FACTOR while sustained, then bisect between the last good and first bad step.

    The same schedule for the pipeline and for the bare model of its shape, so both figures
    are the same measure: the highest paced rate sustained with nothing lost.
    """
    ramp = _Ramp()
    started = time.monotonic()
    rate = start_rate
    failed_at: float | None = None
    while time.monotonic() - started < budget_s:
        taken = step(rate)
        ramp.steps.append(taken.record)
        if taken.sustained:
            if ramp.best is None or taken.delivered_rate > ramp.best.delivered_rate:
                ramp.best = taken
            if taken.source_rate < 0.95 * rate:
                break  # the source cannot go faster: the ramp ends here
            if failed_at is not None and failed_at / rate < BISECT_RESOLUTION:
                break  # this close below a failed step, bisecting on would only spend the budget
            rate = rate * RAMP_FACTOR if failed_at is None else (rate + failed_at) / 2
        else:
            failed_at = rate
            if ramp.best is None:
                rate /= RAMP_FACTOR * RAMP_FACTOR
            else:
                previous = ramp.best.rate
                if failed_at / previous < 1.15:
                    break
                rate = (previous + failed_at) / 2
        if rate < min(1000, start_rate / 2):
            break
    return ramp


def _ramp(shape: Shape, *, step_s: float, budget_s: float, log: IO[str]) -> _Ramp:
    """The pipeline's ramp: each step a fresh pipeline of ``shape`` at one paced rate."""

    def step(rate: float) -> _Step:
        options = PipelineOptions(
            rate=rate,
            seconds=step_s,
            secure=shape.secure,
            backups=shape.backups,
            journal=shape.journal,
            measure_cpu=True,
            capture=shape.capture,
            capture_format=shape.capture_format,
        )
        result = run_pipeline(options, log)
        ok = _sustained(result)
        summary = result.clients[0][1]
        record = {
            "rate": rate,
            "sent": result.sent[0],
            "source_rate": round(result.source_rate(), 1),
            "delivered": summary["delivered"],
            "delivered_rate": round(result.client_rate(summary), 1),
            "lost": result.lost,
            "undelivered": result.undelivered,
            "drain_s": round(result.drain_s(), 3),
            "sustained": ok,
        }
        return _Step(rate, ok, result.client_rate(summary), result.source_rate(), record, result)

    return _ramp_rates(step, start_rate=shape.start_rate, budget_s=budget_s)


def _model_ramp(relays: int, *, journal: bool = False, start_rate: float, step_s: float, budget_s: float,
                size: int, log: IO[str]) -> _Ramp:  # fmt: skip
    """The bare model's ramp: the same steps and the same test of "sustained" as the pipeline's.

    A step is a fresh model (:mod:`bench.shape`, its source niced as the pipeline's capacity
    sources are; with ``journal`` every relay keeps a bare journal) paced at one rate for
    ``step_s``; sustained when nothing was lost, every message was delivered and the client
    finished within the pipeline's drain allowance.
    """

    def step(rate: float) -> _Step:
        model = run_shape(
            ShapeOptions(
                relays=relays,
                count=round(rate * step_s),
                rate=rate,
                size=size,
                nice_source=True,
                journal=journal,
            ),
            log,
        )
        drain = model["span_s"] - model["sent"] / rate
        ok = model["lost"] == 0 and model["delivered"] >= model["sent"] and drain <= DRAIN_ALLOWANCE_S
        source_rate = model["sent"] / model["send_s"] if model["send_s"] > 0 else 0.0
        record = {
            "rate": rate,
            "sent": model["sent"],
            "source_rate": round(source_rate, 1),
            "delivered": model["delivered"],
            "delivered_rate": round(model["rate"], 1),
            "lost": model["lost"],
            "drain_s": round(drain, 3),
            "sustained": ok,
        }
        return _Step(rate, ok, model["rate"], source_rate, record, model)

    return _ramp_rates(step, start_rate=start_rate, budget_s=budget_s)


def run(*, quick: bool = False, journal: bool = True, backups: int = 2) -> list[Figure]:
    """Ramp the source rate in three shapes, each beside the bare pyzmq ceiling and the bare model.

    ``throughput``: active + 1 backup, open data plane, no journal (the
    pipeline's own cost); ``throughput_secure``: the same with CURVE on the
    lines and the sync bus; ``throughput_journal``: the production shape,
    journals with ``--fsync batch`` on every adapter and ``backups`` backups
    (``feedha bench throughput --journal --backups 2``, the default). All
    ramps run in the same invocation between the same two ceiling
    measurements, so their ratios compare on this machine, today.

    Each figure is read against the bare model of its shape (the module
    docstring, "The bare model").

    Args:
        quick: shorter steps and a smaller time budget.
        journal: the third ramp journals (``--no-journal``: it does not).
        backups: backups per group in the third ramp.

    Returns:
        Three figures (msg/s), with their ramps in the parameters.
    """
    step_s = QUICK_STEP_S if quick else STEP_S
    budget = QUICK_RAMP_BUDGET_S if quick else RAMP_BUDGET_S
    capture = write_capture(CAPTURE_MESSAGES)
    itch = write_itch_capture(ITCH_CAPTURE_ORDERS)
    shapes = _shapes(backups=backups, journal=journal, capture=capture, itch=itch)
    size = round(mean_source_bytes())
    relays = sorted({shape.backups + 1 for shape in shapes.values()})
    with open_log("throughput") as log:
        ceilings = [ceiling(quick=quick, log=log)]
        models = [_shape_ceilings(relays, quick=quick, size=size, log=log)]
        ramps: dict[str, _Ramp] = {}
        cpu: dict[str, dict[str, Any] | None] = {}
        for name, shape in shapes.items():
            ramps[name] = _ramp(shape, step_s=step_s, budget_s=budget, log=log)
            cpu[name] = _cpu_beside_shape(ramps[name], shape, step_s=step_s, size=size, log=log)
        model_ramps = _model_ramps(shapes, ramps, relays, step_s=step_s, budget_s=budget, size=size, log=log)
        ceilings.append(ceiling(quick=quick, log=log))
        models.append(_shape_ceilings(relays, quick=quick, size=size, log=log))
    top = max(c["rate"] for c in ceilings)
    common = _common_params(step_s=step_s, ceilings=ceilings, size=size, quick=quick, log=log.name)
    capture.unlink(missing_ok=True)
    itch.unlink(missing_ok=True)
    values = {name: ramp.value for name, ramp in ramps.items()}
    figures = []
    for name, shape in shapes.items():
        journaled = model_ramps.get(_model_of(shape)) if shape.journal else None
        params = {
            **common,
            "cpu": cpu[name],
            **ramps[name].params(),
            **_journaled_model(values[name], journaled),
        }
        open_model = model_ramps[(shape.backups + 1, False)]
        figures.append(_figure(name, shape, values, top, models, open_model, params=params))
    return figures


def _shapes(*, backups: int, journal: bool, capture: Path, itch: Path) -> dict[str, Shape]:
    # The ramps, by figure name: open, CURVE, the production shape, and the two captured formats.
    return {
        "throughput": Shape(),
        "throughput_secure": Shape(secure=True),
        "throughput_journal": Shape(backups=backups, journal=journal),
        "throughput_fix44": Shape(capture=capture, start_rate=FIX44_RAMP_START),
        "throughput_itch50": Shape(capture=itch, capture_format="itch50", start_rate=ITCH50_RAMP_START),
    }


def _common_params(
    *, step_s: float, ceilings: list[dict[str, Any]], size: int, quick: bool, log: str
) -> dict[str, Any]:
    # The parameters every figure of the run shares.
    return {
        "source": "plain source (plain_source), 1 stream, 200 symbols, seed 7",
        "adapter_heartbeat_timeout_s": HEARTBEAT_TIMEOUT_S,
        "source_batching": SOURCE_BATCHING,
        "client": "client_lib.Subscriber joined to every line (arbitrating), no decode",
        "step_s": step_s,
        "ceiling_runs": [round(c["rate"], 1) for c in ceilings],
        "ceiling_payload_bytes": 100,
        "mean_source_message_bytes": size,
        "quick": quick,
        "log": log,
    }


def _model_ramps(
    shapes: dict[str, Shape],
    ramps: dict[str, _Ramp],
    relays: list[int],
    *,
    step_s: float,
    budget_s: float,
    size: int,
    log: IO[str],
) -> dict[tuple[int, bool], _Ramp]:
    # The bare model's ramp for every relay count (open), and for each ramp's own model, each
    # starting a step below the best pipeline rate read against it.
    wanted = sorted({(n, False) for n in relays} | {_model_of(shape) for shape in shapes.values()})
    return {
        (n, journaled): _model_ramp(
            n,
            journal=journaled,
            start_rate=max(
                [RAMP_START] + [r.value for k, r in ramps.items() if _model_of(shapes[k]) == (n, journaled)]
            )
            / RAMP_FACTOR,
            step_s=step_s,
            budget_s=budget_s,
            size=size,
            log=log,
        )
        for n, journaled in wanted
    }


def _model_of(shape: Shape) -> tuple[int, bool]:
    """The bare model a ramp is read against: its relay count, and whether the relays journal."""
    return shape.backups + 1, shape.journal


def _journaled_model(value: float, model_ramp: _Ramp | None) -> dict[str, Any]:
    """A journaling shape's figure beside the model whose relays journal as well (parameters).

    ``ratio_shape`` compares the pipeline with the bare model, which writes nothing; a
    journaling pipeline also writes and syncs every message once per adapter. The journaling
    model pays the disk's part of that with nothing of feedha's journal format, so
    ``ratio_shape_journal`` is the share of a bare journaling shape's rate feedha keeps.
    """
    if model_ramp is None:
        return {}
    ceiling = model_ramp.value or None
    return {
        "ceiling_shape_journal": None if ceiling is None else round(ceiling, 1),
        "ceiling_shape_journal_steps": model_ramp.steps,
        "ratio_shape_journal": None if ceiling is None else round(value / ceiling, 3),
    }


def _figure(
    name: str,
    shape: Shape,
    values: dict[str, float],
    top: float,
    models: list[dict[int, dict[str, Any]]],
    model_ramp: _Ramp,
    *,
    params: dict[str, Any],
) -> Figure:
    plain = values["throughput"]
    runs = [model[shape.backups + 1] for model in models]
    return figure(
        name=name,
        value=values[name],
        unit="msg/s",
        ceiling=top,
        ceiling_shape=model_ramp.value or None,
        params={
            **params,
            "adapters": f"active + {shape.backups} backup(s)",
            "data_plane": "CURVE on lines and sync bus (--curve-key, --sync-key, --grant-keys)"
            if shape.secure
            else "open (no keys)",
            "journal": "--journal, --fsync batch, replay service" if shape.journal else "none",
            "shape": shape.describe(),
            "shape_model": f"bare source -> {shape.backups + 1} relays -> 1 client reading every line, "
            "first copy kept by sequence number; paced on the same ramp as the pipeline, frames of what "
            "is due (<= 64 messages)",
            "ceiling_shape_steps": model_ramp.steps,
            "ceiling_shape_unpaced": max(round(run["rate"], 1) for run in runs),
            "ceiling_shape_unpaced_runs": [round(run["rate"], 1) for run in runs],
            "ceiling_shape_lost": sum(run["lost"] for run in runs),
            "vs_open": round(values[name] / plain, 3) if plain and name != "throughput" else None,
            **_capture_param(shape),
        },
    )


def _capture_param(shape: Shape) -> dict[str, str]:
    if shape.capture is None:
        return {}
    return {"capture": CAPTURE_DESCRIPTION if shape.capture_format == "fix44" else ITCH_CAPTURE_DESCRIPTION}


def _shape_ceilings(relays: list[int], *, quick: bool, size: int, log: IO[str]) -> dict[int, dict[str, Any]]:
    """One unpaced run of the bare model per relay count (the throughput ceiling of that shape)."""
    count = QUICK_CEILING_COUNT if quick else CEILING_COUNT
    return {
        n: run_shape(ShapeOptions(relays=n, count=count, size=size, nice_source=True), log) for n in relays
    }


def _cpu_beside_shape(
    ramp: _Ramp, shape: Shape, *, step_s: float, size: int, log: IO[str]
) -> dict[str, Any] | None:
    """The best step's CPU per message, beside the bare model's paced at the same rate."""
    if ramp.best is None or ramp.best.result.cpu is None:
        return None
    pipeline = ramp.best.result.cpu
    rate = pipeline["rate"]
    model = run_shape(
        ShapeOptions(
            relays=shape.backups + 1,
            count=round(rate * step_s),
            rate=rate,
            size=size,
            measure_cpu=True,
            nice_source=True,
        ),
        log,
    )
    return {
        "rate": rate,
        "pipeline": pipeline,
        "shape": model.get("cpu"),
        "shape_lost": model["lost"],
        "over_shape": compare(pipeline["processes"], model["cpu"]["processes"]) if "cpu" in model else None,
    }
