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
    argv += ["--idle", "50", "--replay", "20"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=540, check=False)
    result = json.loads(done.stdout.splitlines()[-1])
    assert done.returncode == 0 and result["passed"], (result["failed_checks"], result)
    assert result["honest"]["lost"] == 0 and result["honest"]["line_holes"] == 0
    assert len(result["honest"]["lines"]) == 3
    flood = result["attacks"]["subscription_flood"]["outcomes"]
    assert flood["OK"] <= 256 and flood.get("RESOURCE_EXHAUSTED:TOO_MANY_SUBSCRIPTIONS", 0) > 0
    assert result["attacks"]["churn"]["cycles"] == 30
    assert all(adapter["rebinds"] == 0 for adapter in result["adapters"].values())
    assert result["health"]["failed"] == 0 and result["admin_login"]["p99_ms"] < 1000
