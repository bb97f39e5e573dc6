"""``feedha drill abuse`` end to end, smaller than the issue's figures (the command's defaults)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_abuse_drill_costs_the_honest_parties_nothing() -> None:
    argv = [sys.executable, "-m", "feedha", "drill", "abuse", "--json", "--rate", "5000"]
    argv += ["--attack-seconds", "5", "--subscriptions", "600", "--churn", "30", "--logins", "16"]
    argv += ["--idle", "50", "--replay", "20", "--cancelled-logins", "100", "--watch-streams", "200"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=540, check=False)
    result = json.loads(done.stdout.splitlines()[-1])
    # A string, shown whole: the failed checks and the sections they read come first.
    why = {key: result.get(key) for key in ("failed_checks", "health", "admin_login", "honest", "rss_mib")}
    assert done.returncode == 0 and result["passed"], json.dumps(why) + "\n" + json.dumps(result)
    assert result["honest"]["lost"] == 0 and result["honest"]["line_holes"] == 0
    assert len(result["honest"]["lines"]) == 3
    flood = result["attacks"]["subscription_flood"]["outcomes"]
    # Capped by the subscription quota, and first by the user's request rate (50 a second, 100 at once).
    refused = sum(
        flood.get(f"RESOURCE_EXHAUSTED:{why}", 0) for why in ("TOO_MANY_SUBSCRIPTIONS", "TOO_MANY_REQUESTS")
    )
    assert flood["OK"] <= 256 and refused > 0
    assert result["attacks"]["churn"]["cycles"] == 30
    assert all(adapter["rebinds"] == 0 for adapter in result["adapters"].values())
    assert result["health"]["failed"] == 0 and result["admin_login"]["p99_ms"] < 1000
    # The probe listeners time an idle connection out within the attack: each is opened again.
    idle = [attack for name, attack in result["attacks"].items() if name.startswith("idle ")]
    assert len(idle) == 4 and all(attack["closed_by_server"] > 0 for attack in idle), idle
    # One user's 32 keys on every replay service: refused past one user's budget, and every gap
    # another user asked for meanwhile was answered.
    keys, gaps = result["attacks"]["replay_keys_flood"], result["attacks"]["replay_honest_gaps"]
    assert keys["keys"] == 32 and keys["replies"].get("BUSY", 0) > 0, keys
    assert gaps["asked"] > 0 and gaps["served"] == gaps["asked"], gaps
    # The admin server's own limits: a burst of cancelled logins held within its hashing slots, the
    # watch storm ran with every stream open, and the revoked multicast subscriber read nothing late.
    burst, storm, sealed = (
        result["attacks"][name] for name in ("cancelled_logins", "watch_storm", "sealed_churn")
    )
    assert burst["growth_mib"] <= burst["bound_mib"] + 8 and burst["checked_by_server"] > 0, burst
    assert storm["opened"] == storm["streams"] == 200 and storm["modifies"].get("OK", 0) > 0, storm
    assert sealed["reading_at_revocation"] and sealed["opened_after_bound"] == 0, sealed
    # A forger's high terms on every line: the client-library subscriber lost nothing, ends unfenced.
    forger, client = result["attacks"]["forged_terms"], result["attacks"]["forged_terms_client"]
    assert forger["forged"] > 0 and client["missing"] == 0 and client["lost"] == 0, (forger, client)
    assert client["highest_term"] == client["route_term"], client
