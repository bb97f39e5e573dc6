"""The conflate drill's stalled subscriber: a feed client with ``on_slow="conflate"`` that stops reading.

Run by ``feedha drill conflate`` as a process of its own (its RSS is its
own): the feed client's session (:class:`feedha.client._feed_session.FeedSession`,
what ``FeedClient`` runs) is given the channel's route directly, as the admin
server would hand it (the drill runs no admin server). It reads for
``--read-s``, stops reading for ``--stall-s`` (its lines queue up meanwhile),
then reads until ``--run-s`` has passed (each line socket queues at most
``--rcvhwm`` packets: what bounds a stalled client's memory), sampling its RSS every 0.25 s, and
prints one JSON summary: the switches it made (``Conflated``, ``RealTime``),
the RSS before, during and after the stall, and the last real-time msg_seq it
delivered (the drill compares it with the channel's last: the client must
end current).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Sequence
from typing import Any

import psutil

from feedha.admin_client.session import Line, Route
from feedha.client import Conflated, ConflatedDelivery, Delivery, RealTime, Subscriber, SubscriberConfig
from feedha.client._drive import drive
from feedha.client._feed_core import FeedCore
from feedha.client._feed_session import FeedSession
from feedha.client._slow import slow_watch
from feedha.client._subscriber_config import ChannelSpec
from feedha.client.events import Event

SAMPLE_S = 0.25


def _route(args: argparse.Namespace) -> Route:
    lines = tuple(
        Line(
            adapter_id=f"{args.channel}.{number}",
            line_endpoint=line,
            replay_endpoint=replay,
            role="active" if number == 1 else "backup",
            term=1,
            is_up=True,
            conflated_line_endpoint=conflated,
        )
        for number, (line, replay, conflated) in enumerate(
            zip(args.line, args.replay, args.conflated, strict=True), start=1
        )
    )
    return Route(
        feed="DRILL",
        channel_name=args.channel,
        channel_number=1,
        source_stream="S",
        message_model="feedha.v1.MarketUpdate",
        lines=lines,
        symbols=("*",),
        delayed=False,
    )


def _session(args: argparse.Namespace) -> FeedSession[Subscriber]:
    def make(spec: ChannelSpec, core: FeedCore) -> Subscriber:
        return Subscriber([spec], core.config, on_retransmission_needed=core.retransmit)

    session: FeedSession[Subscriber] = FeedSession(
        SubscriberConfig(rcvhwm=args.rcvhwm),
        kind="drill client",
        retry_deadline_s=1.0,
        poll_interval_s=0.1,
        wakeup=threading.Event(),
        make_subscriber=make,
    )
    session.opened = True  # no admin server: the route below stands for its answer
    session.slow = slow_watch("conflate", args.slow_after, mode="realtime")
    session._push("subscribed", (_route(args),))
    return session


def _poll(session: FeedSession[Subscriber], seconds: float) -> list[Any]:
    def wait(timeout: float) -> list[Event]:
        subscriber = session.subscriber
        if subscriber is None:
            time.sleep(min(timeout, 0.05))
            return []
        return subscriber.poll(timeout)

    return drive(session.poll_steps(seconds, status=True), wait)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Read, stall, read again; the summary."""
    session, process = _session(args), psutil.Process()
    began = time.monotonic()
    counts = {"delivered": 0, "conflated_deliveries": 0, "conflated_events": 0, "real_time_events": 0}
    last_seq, rss = 0, {"before": 0.0, "stall_peak": 0.0, "after_peak": 0.0}
    stalled = False
    while (elapsed := time.monotonic() - began) < args.run_s:
        if args.read_s <= elapsed < args.read_s + args.stall_s:
            if not stalled:
                rss["before"], stalled = process.memory_info().rss / 2**20, True
            time.sleep(SAMPLE_S)  # the stall under test: nothing is read
            rss["stall_peak"] = max(rss["stall_peak"], process.memory_info().rss / 2**20)
            continue
        for event in _poll(session, SAMPLE_S):
            if type(event) is Delivery:
                counts["delivered"] += 1
                last_seq = max(last_seq, event.msg_seq)
            elif isinstance(event, ConflatedDelivery):
                counts["conflated_deliveries"] += 1
            elif isinstance(event, Conflated):
                counts["conflated_events"] += 1
            elif isinstance(event, RealTime):
                counts["real_time_events"] += 1
        if stalled:
            rss["after_peak"] = max(rss["after_peak"], process.memory_info().rss / 2**20)
    slow = session.slow
    session.close_lines()
    return {
        "event": "summary",
        **counts,
        "last_real_time_msg_seq": last_seq,
        "ends_in_real_time": slow is not None and not slow.conflated,
        "rss_mb": {key: round(value, 1) for key, value in rss.items()},
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point (``python -m feedha.drills.conflate_client``)."""
    parser = argparse.ArgumentParser(prog="feedha.drills.conflate_client", description=__doc__)
    parser.add_argument("--channel", required=True)
    parser.add_argument("--line", action="append", required=True)
    parser.add_argument("--replay", action="append", required=True)
    parser.add_argument("--conflated", action="append", required=True)
    parser.add_argument("--read-s", type=float, required=True)
    parser.add_argument("--stall-s", type=float, required=True)
    parser.add_argument("--run-s", type=float, required=True)
    parser.add_argument("--slow-after", type=float, default=1.0)
    parser.add_argument("--rcvhwm", type=int, default=1000, help="packets each line socket queues at most")
    args = parser.parse_args(argv)
    print(json.dumps({"event": "ready"}), flush=True)
    print(json.dumps(run(args)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
