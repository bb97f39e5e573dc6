"""A channel's arbitration counters: one snapshot for the channel, one for each of its lines.

:meth:`ChannelArbiter.stats <feedha.client.arbiter.ChannelArbiter.stats>` builds them;
subscribers hand them on (``stats()``), and the metrics collector and the
console read them. Plain frozen data.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class LineStats:
    """Counters for one line of a channel."""

    line: int
    adapter: int | None
    packets: int
    blocks: int
    heartbeats: int
    first_copies: int
    duplicates: int
    garbage: int
    stale: int
    last_term: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ArbiterStats:
    """A snapshot of one channel's arbitration counters.

    ``duplicates`` counts blocks dropped because an identical copy came first;
    ``late`` counts blocks below the delivery point that cannot be checked
    (declared lost, before the start, or older than the conflict window);
    ``stale`` counts packets dropped for a term below ``highest_term``;
    ``garbage`` counts packets that failed to decode or named another channel;
    ``suspect`` counts packets dropped for a ``msg_seq`` far past everything
    seen that no other line or later packet confirmed; ``line_holes`` counts
    ``msg_seq``s that no line carried (delivered from a retransmission, and no
    line copy came later): a failover that costs nothing leaves none.
    """

    channel: int | None
    next_seq: int | None
    delivered: int
    duplicates: int
    conflicts: int
    late: int
    stale: int
    garbage: int
    garbage_reasons: dict[str, int]
    gaps: int
    open_gaps: int
    retransmission_requests: int
    lost: int
    highest_term: int | None
    active_line: int | None
    buffered: int
    lines: tuple[LineStats, ...]
    suspect: int = 0
    purged: int = 0  # tombstones taken in their msg_seq's place (Purged events)
    line_holes: int = 0  # msg_seqs no line carried: delivered from a retransmission only

    @property
    def packets(self) -> int:
        return sum(line.packets for line in self.lines)
