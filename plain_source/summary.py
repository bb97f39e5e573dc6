"""What a run of a source sent: the summary ``feedha source`` prints as one JSON line at exit."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from feedha.plain_source.pacing import PublishDelays


@dataclass(slots=True)
class SourceSummary:
    """What a run sent; :meth:`to_json` is the line ``feedha source`` prints at exit."""

    streams: tuple[str, ...]
    endpoints: dict[str, str]
    sent_per_stream: list[int]
    last_seq: list[int]
    malformed: int = 0
    forgiven: int = 0
    elapsed_s: float = 0.0  # from start to the end of sending, generation ahead of time excluded
    pregenerate_s: float = 0.0  # making the run ahead of the clock (--pregenerate), waiting for its epoch
    error: str | None = None
    frames: int = 0  # ZeroMQ messages sent (without malformed injection, messages per frame: sent / frames)
    publish_delays: PublishDelays | None = None  # event -> send, when stamps are due times
    backpressure: dict[str, float | int] = field(default_factory=dict)  # waits for slow subscribers

    @property
    def sent(self) -> int:
        """Valid messages sent over all streams."""
        return sum(self.sent_per_stream)

    def to_json(self) -> str:
        """One JSON line."""
        body: dict[str, object] = {
            "sent": self.sent,
            "streams": {
                name: {"number": i + 1, "last_seq": self.last_seq[i], "sent": self.sent_per_stream[i]}
                for i, name in enumerate(self.streams)
            },
            "endpoints": self.endpoints,
            "malformed": self.malformed,
            "forgiven": self.forgiven,
            "elapsed_s": round(self.elapsed_s, 3),
            "achieved_rate": round(self.sent / self.elapsed_s, 1) if self.elapsed_s > 0 else 0.0,
            "frames": self.frames,
            "backpressure": self.backpressure,
        }
        if self.publish_delays is not None:
            body["publish_latency_us"] = self.publish_delays.summary()
        if self.pregenerate_s:
            body["pregenerate_s"] = round(self.pregenerate_s, 3)
        if self.error:
            body["error"] = self.error
        return json.dumps(body)
