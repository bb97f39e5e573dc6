"""The chaos drill's fault schedule: seeded, bounded, every kind drawn."""

from __future__ import annotations

from feedha.drills.chaos_plan import DURATION_S, KINDS, plan_faults


def test_the_same_seed_plans_the_same_faults_and_another_seed_others() -> None:
    assert plan_faults(5, 120) == plan_faults(5, 120)
    assert plan_faults(5, 120) != plan_faults(6, 120)


def test_a_two_minute_plan_has_more_than_ten_faults_of_every_kind_within_the_run() -> None:
    plans = [plan_faults(seed, 120) for seed in range(20)]
    assert all(len(plan) > 10 for plan in plans)
    assert {fault.kind for plan in plans for fault in plan} == set(KINDS)
    for plan in plans:
        assert all(0 < fault.at < 118 for fault in plan)
        assert [f.at for f in plan] == sorted(f.at for f in plan)
        for fault in plan:
            low, high = DURATION_S.get(fault.kind, (0.0, 0.0))
            assert low <= fault.duration <= high and 0 <= fault.pick < 1


def test_busy_turns_are_drawn_only_when_asked_and_leave_the_seed_s_schedule_alone_otherwise() -> None:
    assert all(f.kind != "busy" for seed in range(20) for f in plan_faults(seed, 120))
    assert plan_faults(5, 120, busy=False) == plan_faults(5, 120)
    busy = [f for seed in range(20) for f in plan_faults(seed, 120, busy=True) if f.kind == "busy"]
    low, high = DURATION_S["busy"]
    assert len(busy) > 20 and all(low <= f.duration <= high for f in busy)
