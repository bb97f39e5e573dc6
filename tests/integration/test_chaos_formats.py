"""``feedha drill chaos --format itch50|fix44 --minutes 2``: every poison kind and flood of the format.

The acceptance commands of issue 58 (CI runs them with the slow drills): a capture of the
format with every poison kind in turn and its floods (itch50: order references that collide
in an unkeyed table and a run of new best prices; fix44: a crowd of new symbols, new best
prices past a full side and a side filled to its depth), together with the drill's kills,
stops, restarts, stalled subscribers, replay floods and bad commands. Nothing is lost, no
line misses a message, no two lines disagree, every adapter is alive at the end within the
pod's memory, and the CPU an adapter spends a message during each flood is at most twice
what it was before.
``tests/unit/test_chaos_formats.py`` keeps the captures' poison, floods and accounting in the
default suite.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from feedha.adapter.formats.fix44.poison import FLOODS as FIX44_FLOODS
from feedha.adapter.formats.fix44.poison import POISON_KINDS as FIX44_POISON
from feedha.adapter.formats.itch50.poison import FLOODS as ITCH_FLOODS
from feedha.adapter.formats.itch50.poison import POISON_KINDS as ITCH_POISON
from feedha.drills.chaos_formats import MAX_RSS_MIB


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("input_format", ["itch50", "fix44"])
def test_the_two_minute_chaos_drill_of_each_format_loses_nothing_and_holds_the_honest_rate(
    input_format: str,
) -> None:
    argv = [sys.executable, "-m", "feedha", "drill", "chaos", "--format", input_format]
    out = subprocess.run(
        [*argv, "--minutes", "2", "--seed", "5", "--json"], capture_output=True, text=True, timeout=860
    )
    result = json.loads(out.stdout)
    print(json.dumps(result))
    assert (result["lost"], result["duplicates"], result["conflicts"], result["line_holes"]) == (0, 0, 0, 0)
    faults = result["faults"]
    assert sum(n for kind, n in faults.items() if not kind.startswith("poison")) > 10
    kinds = ITCH_POISON if input_format == "itch50" else FIX44_POISON
    assert all(faults.get(f"poison_{kind}", 0) > 0 for kind in kinds)
    assert result["adapters_alive"] == 3 and max(result["max_rss_mib"].values()) <= MAX_RSS_MIB
    assert set(result["honest_rate"]) == set(ITCH_FLOODS if input_format == "itch50" else FIX44_FLOODS)
    assert all(flood["held"] for flood in result["honest_rate"].values()), result["honest_rate"]
    assert out.returncode == 0
