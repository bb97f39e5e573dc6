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
``ratio_shape`` the pipeline's over it (``shape_us`` in the parameters).

Per hop (``hops_us`` in the parameters): ``source_to_publish`` is event time
→ the adapter's packet send time (the source's batching, the first hop and
the adapter), ``publish_to_delivery`` is that send time → delivery (the
second hop and the client). One clock: everything runs on this machine.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from feedha.bench.ceiling import run_pair
from feedha.bench.common import Figure, figure
from feedha.bench.pipeline import (
    SOURCE_BATCHING,
    PipelineOptions,
    PipelineResult,
    mean_source_bytes,
    open_log,
    run_pipeline,
)
from feedha.bench.shape import ShapeOptions, run_shape

RATES: Final = (1_000.0, 10_000.0, 50_000.0)
QUICK_RATES: Final = (1_000.0, 10_000.0)
SECONDS: Final = 5.0
QUICK_SECONDS: Final = 2.0
PERCENTILES: Final = ("p50", "p99", "p99.9", "max")


def run(*, quick: bool = False) -> list[Figure]:
    """Measure latency percentiles at each rate, beside the bare hop.

    Args:
        quick: fewer rates, shorter runs.

    Returns:
        Eight figures per rate: ``latency_p50``, ``latency_p99``, ``latency_p99.9``,
        ``latency_max`` (µs, over the bare hop), ``latency_p50_two_hop`` and
        ``latency_p99_two_hop`` (over the relay), each also over the bare model of the same
        shape (``ratio_shape``); and ``latency_p50_one_adapter``, ``latency_p99_one_adapter``
        (the pipeline without a backup, over the relay).
    """
    seconds = QUICK_SECONDS if quick else SECONDS
    size = round(mean_source_bytes())
    figures: list[Figure] = []
    with open_log("latency") as log:
        for rate in QUICK_RATES if quick else RATES:
            count = int(rate * seconds)
            bare = run_pair(count=count, rate=rate, latency=True, log=log)
            relay = run_pair(count=count, rate=rate, latency=True, log=log, hops=2)
            options = PipelineOptions(rate=rate, seconds=seconds, latency=True)
            model = run_shape(
                ShapeOptions(relays=options.backups + 1, count=count, rate=rate, size=size, latency=True), log
            )
            result = run_pipeline(options, log)
            one = run_pipeline(replace(options, backups=0), log)
            summary = result.clients[0][1]
            pipeline = summary["latency_us"]
            shape = model["latency_us"]
            params: dict[str, Any] = {
                "rate": rate,
                "seconds": seconds,
                "sent": result.sent[0],
                "source_rate": round(result.source_rate(), 1),
                "lost": result.lost,
                "undelivered": result.undelivered,
                "failovers": result.failovers,
                "source_batching": SOURCE_BATCHING,
                "worst_latency_us": summary.get("worst_latency_us"),
                "samples": pipeline["count"],
                "pipeline_us": pipeline,
                "bare_us": bare["latency_us"],
                "bare_two_hop_us": relay["latency_us"],
                "shape_us": shape,
                "shape_model": f"bare source -> {model['relays']} relays -> 1 client reading every line, "
                f"first copy kept by sequence number; {size}-byte messages, paced and batched as the source",
                "shape_lost": model["lost"],
                "hops_us": summary.get("hops_us"),
                "source_publish_us": result.source_summaries[0].get("publish_latency_us"),
                "from": "source event time (FIX tag 60, the scheduled send time) to client delivery",
                "adapters": "active + 1 backup",
                "quick": quick,
                "log": log.name,
            }
            # Each percentile over the bare hop, then the median and p99 over the relay.
            over = [(name, "", bare) for name in PERCENTILES] + [
                (name, "_two_hop", relay) for name in ("p50", "p99")
            ]
            figures += [
                figure(
                    name=f"latency_{name}{suffix}",
                    value=pipeline[name],
                    unit="us",
                    ceiling=ceiling["latency_us"][name],
                    ceiling_shape=shape[name],
                    params=params,
                )
                for name, suffix, ceiling in over
            ]
            figures += _one_adapter(one, relay["latency_us"], params)
    return figures


def _one_adapter(result: PipelineResult, relay: dict[str, float], params: dict[str, Any]) -> list[Figure]:
    # The relay's shape: source -> one adapter (no backup) -> client, over the relay. Its
    # parameters are the run's (the rate, the ceilings, the model) with its own pipeline figures.
    summary = result.clients[0][1]
    own = {
        **params,
        "sent": result.sent[0],
        "source_rate": round(result.source_rate(), 1),
        "samples": summary["latency_us"]["count"],
        "source_publish_us": result.source_summaries[0].get("publish_latency_us"),
        "lost": result.lost,
        "undelivered": result.undelivered,
        "failovers": result.failovers,
        "worst_latency_us": summary.get("worst_latency_us"),
        "pipeline_us": summary["latency_us"],
        "one_adapter_us": summary["latency_us"],
        "hops_us": summary.get("hops_us"),
        "adapters": "1, no backup (the relay's shape)",
    }
    return [
        figure(
            name=f"latency_{name}_one_adapter",
            value=summary["latency_us"][name],
            unit="us",
            ceiling=relay[name],
            params=own,
        )
        for name in ("p50", "p99")
    ]
