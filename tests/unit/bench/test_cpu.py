"""CPU per message: the window arithmetic and the comparison with the bare model (no processes)."""

from __future__ import annotations

import pytest

from feedha.bench.cpu import Sample, compare, costs

pytestmark = pytest.mark.timeout(30)


def test_costs_are_the_cpu_of_the_window_per_message_and_per_core() -> None:
    first = Sample(at=10.0, cpu={"source": 1.0, "active": 2.0})
    last = Sample(at=12.0, cpu={"source": 1.5, "active": 3.0})
    out = costs(first, last, messages=100_000)
    assert out == {
        "source": {"cpu_percent": 25.0, "us_per_msg": 5.0},
        "active": {"cpu_percent": 50.0, "us_per_msg": 10.0},
    }


def test_costs_of_a_process_that_ended_or_a_window_without_messages() -> None:
    first = Sample(at=0.0, cpu={"client": 4.0})
    last = Sample(at=1.0, cpu={"client": 0.0})  # gone: psutil read 0
    assert costs(first, last, messages=0) == {"client": {"cpu_percent": 0.0, "us_per_msg": None}}


def test_compare_divides_each_role_by_its_counterpart_in_the_model() -> None:
    pipeline = {
        "source": {"us_per_msg": 2.0},
        "active": {"us_per_msg": 8.0},
        "backup-1": {"us_per_msg": 6.0},
        "backup-2": {"us_per_msg": 10.0},
        "client": {"us_per_msg": 3.0},
    }
    shape = {
        "source": {"us_per_msg": 1.0},
        "relay-1": {"us_per_msg": 3.0},
        "relay-2": {"us_per_msg": 5.0},
        "relay-3": {"us_per_msg": 4.0},
        "client": {"us_per_msg": 1.5},
    }
    assert compare(pipeline, shape) == {
        "active_over_relay": 2.0,
        "backup_over_relay": 2.0,
        "client_over_bare_client": 2.0,
        "source_over_bare_source": 2.0,
    }


def test_compare_without_a_counterpart_says_nothing() -> None:
    assert compare({"active": {"us_per_msg": 1.0}}, {"client": {"us_per_msg": None}}) == {
        "active_over_relay": None,
        "backup_over_relay": None,
        "client_over_bare_client": None,
        "source_over_bare_source": None,
    }
