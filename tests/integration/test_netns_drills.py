"""Multi-host drills: every component in its own network namespace on a bridge (needs root).

Each test runs ``feedha.drills.failover.run_failover`` with ``hosts="netns"``; the drill
builds a segment with a fresh tag and removes it in ``finally``, and the
fixture below checks no namespace or link of ours is left behind.
"""

from __future__ import annotations

import importlib.util
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from feedha import netns, transport
from feedha.drills.failover import run_failover
from feedha.drills.group import DrillOptions

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(not netns.is_available(), reason="needs root, iproute2 (ip) and nftables (nft)"),
]

LINE = "epgm" if transport.has_multicast() else "tcp"


def _namespaces() -> set[str]:
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return {line.split(" ")[0] for line in names.splitlines()}


@pytest.fixture(autouse=True)
def tags(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Record the tag of every segment the test builds; afterwards none of them may be left."""
    made: list[str] = []
    new_tag = netns.new_tag

    def recording() -> str:
        made.append(new_tag())
        return made[-1]

    monkeypatch.setattr(netns, "new_tag", recording)
    yield made
    left = {ns for ns in _namespaces() for tag in made if ns.startswith(f"{tag}-")}
    assert not left, f"segments left behind: {sorted(left)}"


def _drill(tmp_path: Path, **kwargs: Any) -> dict[str, Any]:
    options = DrillOptions(hosts="netns", transport=LINE, rate=5_000, seconds=8, symbols=100, **kwargs)
    with open(tmp_path / "drill.log", "w") as log:
        result = run_failover(options, log)
    print(result)
    return result


def _exactly_once(result: dict[str, Any]) -> None:
    assert result["sent"] > 0
    assert (result["lost"], result["duplicates"], result["out_of_order"], result["conflicts"]) == (0, 0, 0, 0)


def test_segment_builds_and_tears_down() -> None:
    with netns.Segment(["a", "b"]) as segment:
        assert segment.plan is not None
        out = segment.run("a", ["ip", "-4", "route"])
        assert "224.0.0.0/4 dev veth0" in out
        assert segment.address("b") in segment.run("b", ["ip", "-4", "-o", "addr"])
        tag = segment.tag
    assert not any(name.startswith(f"{tag}-") for name in _namespaces())


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_active_host_cut_off_mid_stream(tmp_path: Path) -> None:
    result = _drill(tmp_path, backups=2, kill="none", cut="active")
    _exactly_once(result)
    assert result["promoted"]
    assert result["actives_at_end"] == 1


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_sync_partition_heals_to_one_active(tmp_path: Path) -> None:
    result = _drill(tmp_path, backups=1, kill="none", partition=("active", "backup"))
    _exactly_once(result)
    assert result["actives_at_end"] == 1
    assert [f["fault"] for f in result["faults"]] == ["partition", "heal_partition"]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_backup_host_restarted_resynchronizes(tmp_path: Path) -> None:
    result = _drill(tmp_path, backups=2, kill="none", restart="backup")
    _exactly_once(result)
    assert result["actives_at_end"] == 1
    restarted = next(f["adapter"] for f in result["faults"] if f["fault"] == "restart")
    assert result["roles_at_end"][str(restarted)] == "backup"


def _replay_ready() -> str | None:
    """Why the journal-recovery drills cannot run yet, or None when they can."""
    if importlib.util.find_spec("feedha.client.replay_client") is None:
        return "client_lib/replay_client.py (the replay service's client) is not there yet"
    source = Path(__file__).resolve().parents[2] / "feedha" / "drills" / "client.py"
    if "--replay" not in source.read_text():
        return "feedha/drills/client.py takes no --replay endpoints, so the drill client cannot fill gaps"
    return None


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize(("percent", "loss_on"), [(2.0, "active"), (0.5, "lines")])
def test_loss_is_recovered_from_a_journal(tmp_path: Path, percent: float, loss_on: str) -> None:
    missing = _replay_ready()
    if missing is not None:
        pytest.skip(f"journal recovery in the drill client: {missing}")
    result = _drill(tmp_path, backups=1, kill="none", loss=percent, loss_on=loss_on, journal=True)
    _exactly_once(result)
    assert result["gaps"] == result["gaps_recovered"]
