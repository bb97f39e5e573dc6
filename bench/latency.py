"""Latency benchmark: one-way latency from the source's send to the client's delivery.

At fixed source rates (1k, 10k, 50k msg/s; quick: 1k and 10k, shorter) a fresh
pipeline (plain source → active + 1 backup → one arbitrating client) runs
for a few seconds. The plain source stamps each message's event time (FIX
tag 60) with its scheduled send time (message *k* is due and stamped at
``start + (k + 1) / rate``, the clock read right before the first send).
It sends every message as soon as it is due: a frame carries several only
when several fell due while the source slept or worked (its own event ->
send delays are ``source_publish_us`` in the parameters; until issue 27 a
1 ms tick held each frame until ``rate × 1 ms`` messages were due, 0.45 ms
of waiting on average at 10k msg/s). ``delivery wall time − event time`` is the one-way latency
through source, adapter and client, queueing included. The source makes its
run before the clock starts (``--pregenerate --due-stamps``: made for an epoch
past the making, so stamps are still the scheduled send times), as the bare
models' senders send frames made beforehand: a live generator took 40-60% of
a core of this 2-core machine at 10-50k msg/s, beside the system under test.
The client decodes every delivery for it and records into an HdrHistogram
(3 significant digits).

Ceiling, in the same run and at the same rate: the bare pyzmq PUB→SUB hop
(:func:`bench.ceiling.run_pair`, 100-byte messages stamped with their
scheduled send time too), and the bare two-hop relay (PUB → SUB/PUB → SUB,
forwarding as it is), which has as many hops as the pipeline. The figures
are latencies, so their ``ratio`` is how many times the bare hop's (lower is
better); ``latency_p50_two_hop`` and ``latency_p99_two_hop`` are the pipeline's
median and p99 over the relay's.

The relay has one process between source and client; the pipeline has two
(the backup converts and publishes everything the active does, on the same
cores). So the same run also times the pipeline of the relay's own shape,
one adapter and no backup (``latency_p50_one_adapter``,
``latency_p99_one_adapter``: its median and p99 over the relay's; their
parameters carry its own figures, in ``one_adapter_us``, ``pipeline_us`` and
``hops_us``, beside the run's ceilings).

The bare model of the pipeline's own shape (:mod:`bench.shape`: a source
paced and batched as the plain source is, two relays forwarding every frame
unchanged, a client reading both lines and keeping the first copy of each
message, messages of the plain source's mean size) runs at the same rate in
the same run; each figure's ``ceiling_shape`` is its percentile and
``ratio_shape`` the pipeline's over it (``shape_us`` in the parameters). The
one-adapter figures have a model of their own shape too, the same with one
relay (``shape_one_us``): the relay above sends 100-byte single-part
messages to a client that blocks on one socket, where the pipeline's source
sends two-part messages of the source's size in frames and its client polls
its lines, and that alone costs the bare model ~70 µs of p50 at 10k msg/s
on this machine.

A backup's line is not a relay's: its output waits at its output gate for
the active's next heartbeat report, so it goes out once a heartbeat
interval, in a lump, and the backup works in lumps on that beat. The held
model (:mod:`bench.shape`'s ``hold``: the same two relays, the backup's
forwarding everything it received once every
:data:`~feedha.adapter.core.sync_types.HEARTBEAT_INTERVAL_S`) runs in the same
round; the pipeline's figures carry their percentile of it as
``ceiling_shape_held`` and the pipeline's over it as ``ratio_shape_held``
(``shape_held_us`` in the parameters): what feedha adds to the shape its
sync rules require.

On this shared 2-core VM one arm's percentiles move 2-3 × from one minute to
the next, so a single run's ratio can read on either side of a target.
``--rounds N`` makes each rate's runs N times, in turn (bare hop, relay,
model, held model, model with one relay, pipeline, one adapter; then
again), so that a noisy minute falls on every arm of its round; each
percentile reported is the median of the rounds' (``pipeline_us``,
``bare_two_hop_us``, ``shape_us`` ... are those medians, ``hops_us`` too,
hop by hop), and ``per_round`` lists every round's own p50 / p99 of each
arm and the pipeline's ratios, so the spread is on record beside the
median.

Per hop (``hops_us`` in the parameters): ``source_to_publish`` is event time
→ the adapter's packet send time (the source's batching, the first hop and
the adapter), ``publish_to_delivery`` is that send time → delivery (the
second hop and the client). One clock: everything runs on this machine.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from typing import IO, Any, Final

from feedha.adapter.core.sync_types import HEARTBEAT_INTERVAL_S
from feedha.bench.ceiling import run_pair
from feedha.bench.common import MAX_LATENCY_ROUNDS, Figure, figure
from feedha.bench.pipeline import (
    SOURCE_BATCHING,
    PipelineOptions,
    PipelineResult,
    mean_source_bytes,
    open_log,
    run_pipeline,
)
from feedha.bench.shape_run import ShapeOptions, run_shape

RATES: Final = (1_000.0, 10_000.0, 50_000.0)
QUICK_RATES: Final = (1_000.0, 10_000.0)
SECONDS: Final = 5.0
QUICK_SECONDS: Final = 2.0
PERCENTILES: Final = ("p50", "p99", "p99.9", "max")


def run(*, quick: bool = False, rounds: int = 1) -> list[Figure]:
    """Measure latency percentiles at each rate, beside the bare hop.

    Args:
        quick: fewer rates, shorter runs.
        rounds: how many times each rate's runs are made, in turn (bare hop, relay, model,
            held model, model with one relay, pipeline, pipeline without a backup; then
            again), so that a noisy minute of a shared machine falls on every arm rather
            than on one. Each percentile reported is then the median of the rounds', and
            the parameters list every round's own (``per_round``).

    Returns:
        Eight figures per rate: ``latency_p50``, ``latency_p99``, ``latency_p99.9``,
        ``latency_max`` (µs, over the bare hop), ``latency_p50_two_hop`` and
        ``latency_p99_two_hop`` (over the relay), each also over the bare model of the same
        shape (``ratio_shape``) and over the held model (``ratio_shape_held``); and
        ``latency_p50_one_adapter``, ``latency_p99_one_adapter`` (the pipeline without a
        backup, over the relay, and over the model with one relay in ``ratio_shape``).

    Raises:
        ValueError: ``rounds`` is not in 1..:data:`MAX_LATENCY_ROUNDS`.
    """
    if not 1 <= rounds <= MAX_LATENCY_ROUNDS:
        raise ValueError(f"rounds must be in 1..{MAX_LATENCY_ROUNDS}, got {rounds}")
    seconds = QUICK_SECONDS if quick else SECONDS
    size = round(mean_source_bytes())
    figures: list[Figure] = []
    with open_log("latency") as log:
        for rate in QUICK_RATES if quick else RATES:
            measured = [_measure_round(rate, seconds, size, log) for _ in range(rounds)]
            figures += _figures(measured, size=size, quick=quick, log_name=log.name)
    return figures


@dataclass(frozen=True, slots=True)
class Round:
    """One round at one rate: each arm's client summary (latencies in µs)."""

    rate: float
    seconds: float
    bare: dict[str, float]  # the bare hop's latency_us
    relay: dict[str, float]  # the bare two-hop relay's latency_us
    shape: dict[str, Any]  # the bare model's result (latency_us, relays, lost)
    shape_one: dict[str, Any]  # the bare model with one relay (the one adapter's shape)
    shape_held: dict[str, Any]  # the held model (the backup's relay forwards once a heartbeat)
    pipeline: PipelineResult  # active + 1 backup
    one: PipelineResult  # one adapter, no backup


def _measure_round(rate: float, seconds: float, size: int, log: IO[str]) -> Round:
    count = int(rate * seconds)
    bare = run_pair(count=count, rate=rate, latency=True, log=log)
    relay = run_pair(count=count, rate=rate, latency=True, log=log, hops=2)
    options = PipelineOptions(rate=rate, seconds=seconds, latency=True)
    model = ShapeOptions(relays=options.backups + 1, count=count, rate=rate, size=size, latency=True)
    shape = run_shape(model, log)
    held = run_shape(replace(model, hold=HEARTBEAT_INTERVAL_S), log)
    shape_one = run_shape(replace(model, relays=1), log)
    result = run_pipeline(options, log)
    one = run_pipeline(replace(options, backups=0), log)
    return Round(rate, seconds, bare["latency_us"], relay["latency_us"], shape, shape_one, held, result, one)


def _figures(rounds: list[Round], *, size: int, quick: bool, log_name: str) -> list[Figure]:
    """One rate's figures from its rounds: each percentile is the median of the rounds'."""
    first = rounds[0]
    runs = _runs([r.pipeline for r in rounds])
    pipeline = runs["pipeline_us"]
    bare = median_latency([r.bare for r in rounds])
    relay = median_latency([r.relay for r in rounds])
    shape = median_latency([r.shape["latency_us"] for r in rounds])
    held = median_latency([r.shape_held["latency_us"] for r in rounds])
    params: dict[str, Any] = {
        "rate": first.rate,
        "seconds": first.seconds,
        **runs,
        "source_batching": SOURCE_BATCHING,
        "bare_us": bare,
        "bare_two_hop_us": relay,
        "shape_us": shape,
        "shape_model": f"bare source -> {first.shape['relays']} relays -> 1 client reading every line, "
        f"first copy kept by sequence number; {size}-byte messages, paced and batched as the source",
        "shape_held_us": held,
        "shape_held_model": f"the same, the backup's relay forwarding everything it received once every "
        f"{first.shape_held['hold_s'] * 1e3:g} ms (a backup's output gate, "
        "released at each heartbeat report of the active)",
        "shape_lost": sum(r.shape["lost"] + r.shape_one["lost"] + r.shape_held["lost"] for r in rounds),
        "from": "source event time (FIX tag 60, the scheduled send time) to client delivery",
        "adapters": "active + 1 backup",
        "rounds": len(rounds),
        "quick": quick,
        "log": log_name,
    }
    if len(rounds) > 1:
        params["per_round"] = [_round_line(r) for r in rounds]
    # Each percentile over the bare hop, then the median and p99 over the relay.
    over = [(name, "", bare) for name in PERCENTILES] + [(name, "_two_hop", relay) for name in ("p50", "p99")]
    figures = [
        figure(
            name=f"latency_{name}{suffix}",
            value=pipeline[name],
            unit="us",
            ceiling=ceiling[name],
            ceiling_shape=shape[name],
            ceiling_shape_held=held[name],
            params=params,
        )
        for name, suffix, ceiling in over
    ]
    shape_one = median_latency([r.shape_one["latency_us"] for r in rounds])
    return figures + _one_adapter([r.one for r in rounds], relay, shape_one, params)


def median_latency(summaries: list[dict[str, float]]) -> dict[str, float]:
    """Each percentile's median over several runs' latency summaries; ``count`` is their sum.

    Args:
        summaries: :func:`bench.ceiling.latency_summary` results (at least one).

    Returns:
        A summary of the same keys.
    """
    merged = {key: round(statistics.median(s[key] for s in summaries), 1) for key in summaries[0]}
    merged["count"] = sum(s["count"] for s in summaries)
    return merged


def _median_hops(hops: list[dict[str, dict[str, float]] | None]) -> dict[str, dict[str, float]] | None:
    known = [h for h in hops if h]
    if not known:
        return None
    return {name: median_latency([h[name] for h in known if name in h]) for name in known[0]}


def _runs(results: list[PipelineResult]) -> dict[str, Any]:
    """The parameters one arm's runs give (the pipeline's, or the one adapter's): its totals
    over the rounds, each percentile's median, the worst deliveries of the round that had the
    worst, and the source's send delays of the round whose p50 is the median."""
    summaries = [r.clients[0][1] for r in results]
    latency = median_latency([s["latency_us"] for s in summaries])
    worst = max(summaries, key=lambda s: s["latency_us"]["max"])
    by_p50 = sorted(results, key=lambda r: r.clients[0][1]["latency_us"]["p50"])
    return {
        "sent": sum(r.sent[0] for r in results),
        "source_rate": round(statistics.median(r.source_rate() for r in results), 1),
        "lost": sum(r.lost for r in results),
        "undelivered": sum(r.undelivered for r in results),
        "failovers": sum(r.failovers for r in results),
        "worst_latency_us": worst.get("worst_latency_us"),
        "samples": latency["count"],
        "pipeline_us": latency,
        "hops_us": _median_hops([s.get("hops_us") for s in summaries]),
        "source_publish_us": by_p50[(len(by_p50) - 1) // 2].source_summaries[0].get("publish_latency_us"),
    }


def _round_line(r: Round) -> dict[str, Any]:
    """One round's p50 / p99 of each arm (µs) and the pipeline's ratios, for the parameters."""
    pipeline = r.pipeline.clients[0][1]["latency_us"]
    one = r.one.clients[0][1]["latency_us"]

    def pair(s: dict[str, float]) -> list[float]:
        return [s["p50"], s["p99"]]

    def over(a: dict[str, float], b: dict[str, float]) -> list[float | None]:
        return [round(a[k] / b[k], 3) if b[k] else None for k in ("p50", "p99")]

    return {
        "pipeline": pair(pipeline),
        "one_adapter": pair(one),
        "relay": pair(r.relay),
        "shape": pair(r.shape["latency_us"]),
        "shape_one": pair(r.shape_one["latency_us"]),
        "shape_held": pair(r.shape_held["latency_us"]),
        "bare": pair(r.bare),
        "pipeline_over_relay": over(pipeline, r.relay),
        "pipeline_over_shape": over(pipeline, r.shape["latency_us"]),
        "pipeline_over_shape_held": over(pipeline, r.shape_held["latency_us"]),
        "one_adapter_over_relay": over(one, r.relay),
        "one_adapter_over_shape": over(one, r.shape_one["latency_us"]),
        "lost": r.pipeline.lost,
        "lost_one_adapter": r.one.lost,
        "shape_lost": r.shape["lost"] + r.shape_one["lost"] + r.shape_held["lost"],
        "source_publish_us": r.pipeline.source_summaries[0].get("publish_latency_us"),
    }


def _one_adapter(
    results: list[PipelineResult],
    relay: dict[str, float],
    shape_one: dict[str, float],
    params: dict[str, Any],
) -> list[Figure]:
    # The relay's shape: source -> one adapter (no backup) -> client, over the relay and over the
    # model with one relay. Its parameters are the run's (the rate, the ceilings) with its own
    # pipeline figures (medians over the rounds, as the pipeline's) and its own model's.
    runs = _runs(results)
    latency = runs["pipeline_us"]
    own = {
        **params,
        **runs,
        "one_adapter_us": latency,
        "shape_one_us": shape_one,
        "adapters": "1, no backup (the relay's shape)",
    }
    return [
        figure(
            name=f"latency_{name}_one_adapter",
            value=latency[name],
            unit="us",
            ceiling=relay[name],
            ceiling_shape=shape_one[name],
            params=own,
        )
        for name in ("p50", "p99")
    ]
