"""``feedha drill chaos --format fix44|itch50``: the drill played from a capture of the format.

The plain source generates ``feedha-fix`` only, so for the formats that have a chaos capture
(their :attr:`~feedha.adapter.formats.capture_face.CaptureFace.chaos`) the drill writes a
capture (``feedha/drills/chaos_captures.py``: about ``--rate`` x the run's seconds messages, the
format's poison every ``--poison-every`` messages, its floods) and the source plays it with
``--file F --format F`` at the drill's rate; the adapters convert the format at book depth
:data:`~feedha.drills.chaos_captures.BOOK_DEPTH`. The summary gains the capture's figures, the
poison by kind and the honest rate through each flood (``feedha/drills/chaos_cost.py``); the run
fails unless every flood held it and no adapter passed :data:`MAX_RSS_MIB`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Final

from feedha.drills.chaos_captures import BOOK_DEPTH, CAPTURE_FORMATS, ChaosCapture, write_capture
from feedha.drills.chaos_cost import CostSampler, flood_costs
from feedha.drills.group import DrillOptions, show_progress

__all__ = [
    "CAPTURE_FORMATS",
    "MAX_RSS_MIB",
    "drill_options_for",
    "format_capture",
    "format_ok",
    "format_summary",
]

MAX_RSS_MIB: Final = 1024.0  # the adapter pod's memory limit (deploy/)


def format_capture(
    input_format: str, *, rate: float, seconds: float, seed: int, poison_every: int
) -> ChaosCapture | None:
    """The capture a ``--format`` run plays (``None``: a format the plain source generates itself)."""
    if input_format not in CAPTURE_FORMATS:
        return None
    show_progress(f"chaos: writing a {input_format} capture")
    return write_capture(input_format, messages=int(rate * seconds), seed=seed, poison_every=poison_every)


def drill_options_for(base: DrillOptions, capture: ChaosCapture) -> DrillOptions:
    """The drill played from ``capture``: the adapters convert its format."""
    played_s = capture.messages / base.rate
    return replace(
        base,
        seconds=played_s,
        extra_adapter_args=["--format", capture.input_format, "--book-depth", str(BOOK_DEPTH)],
        # The capture bounds the source; --seconds only guards against a source that fell behind.
        extra_source_args=["--file", str(capture.path), "--format", capture.input_format,
                           "--seconds", f"{4 * played_s + 60:g}"],
    )  # fmt: skip


def format_summary(capture: ChaosCapture, sampler: CostSampler) -> dict[str, Any]:
    """What a ``--format`` run adds to the summary: the capture and the honest rate per flood."""
    return {
        "format": capture.input_format,
        "capture": {
            "messages": capture.messages,
            "blocks": capture.expected,
            "written_s": round(capture.seconds, 1),
        },
        "honest_rate": flood_costs(sampler.samples, capture.floods, capture.baseline),
    }


def format_ok(result: dict[str, Any]) -> bool:
    """Whether a run held the honest rate through every flood and stayed within memory (a
    feedha-fix run has no floods: only its memory is looked at)."""
    floods = result.get("honest_rate", {})
    rss = [float(v) for v in result["max_rss_mib"].values()]
    held = all(flood["held"] for flood in floods.values())
    return held and (result.get("format") is None or max(rss, default=0.0) <= MAX_RSS_MIB)


def sampler_for(targets: Callable[[], list[tuple[int, str]]]) -> CostSampler:
    """The sampler of the adapters' CPU per message (it runs whatever the format: cheap)."""
    return CostSampler(targets)
