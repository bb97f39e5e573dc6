"""Sleeping to a deadline: the calling thread's timer slack, so a paced sender wakes when due.

Linux lets a sleeping thread wake up to its *timer slack* after the time asked
(50 µs by default), so that timers can be grouped. A sender that sleeps until
its next message's deadline then sends that message 50-75 µs late, every time
(measured on this project's 2-core VM: 74.6 µs p50 past the deadline at
10,000 sleeps a second with the default slack, 24 µs with a slack of 1 µs; the
rest is the scheduler's wake-up). The plain source and the benchmarks' bare
senders set the same slack, so latency figures compare like with like.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from typing import Final

logger = logging.getLogger(__name__)

__all__ = ["FINE_SLACK_NS", "fine_timer_slack"]

FINE_SLACK_NS: Final = 1_000  # 1 µs: below the scheduler's own wake-up latency here
_PR_SET_TIMERSLACK: Final = 29  # <linux/prctl.h>


def fine_timer_slack(slack_ns: int = FINE_SLACK_NS) -> bool:
    """Set the calling thread's timer slack to ``slack_ns``; ``False`` where it cannot be set.

    Only the calling thread changes (threads started later inherit it): call
    it from the thread that sleeps to deadlines. Anything but Linux keeps its
    timers as they are.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        done = bool(libc.prctl(_PR_SET_TIMERSLACK, ctypes.c_ulong(slack_ns), 0, 0, 0) == 0)
    except (OSError, AttributeError) as exc:  # no prctl in this libc
        logger.debug("timer slack left as it is: %s", exc)
        return False
    if not done:
        logger.debug("timer slack left as it is: prctl failed (errno %d)", ctypes.get_errno())
    return done
