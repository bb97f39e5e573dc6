"""Which turns of an adapter have its report repeated on the sync bus (AdapterCore.keepalive_report).

Only the active's, and only a turn that folds its whole state: a checkpoint that is due, a
snapshot asked of it. The report is the one it would send now (its positions do not move during
the turn). A backup's long turn needs none: nobody elects over a backup's silence.
"""

from __future__ import annotations

from functools import partial

from feedha.adapter.core import syncbus

from .group_harness import CoreGroup


def test_only_the_active_s_state_folding_turns_repeat_its_report() -> None:
    group = CoreGroup(2, rate=2000)
    group.run_until(partial(group.in_sync, 2), within=3)
    active, backup = group.members[1].core, group.members[2].core
    now = group.now
    assert active.keepalive_report(now) is None  # no checkpoint due yet (5 s)
    asked = active.keepalive_report(now, snapshot_asked=True)
    assert isinstance(asked, syncbus.StreamState)
    assert asked.last_source_seq == active.sequencer.last_recorded_source_seq
    assert asked.sender.term == active.sync.term
    due = active.keepalive_report(now + 60.0)  # a checkpoint is due by then
    assert isinstance(due, syncbus.StreamState)
    assert backup.keepalive_report(now + 60.0, snapshot_asked=True) is None
