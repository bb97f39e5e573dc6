"""``feedha up`` for the integration tests that need a whole local cluster, and its users' feedctl."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from feedha.procs import JsonProcess

START_S = 120.0


@contextmanager
def feedha_up(
    workdir: Path,
    *,
    rate: float,
    extra: Sequence[str] = (),
    check_exit: bool = False,
    start_s: float = START_S,
) -> Iterator[dict[str, Any]]:
    """Run ``feedha up --channels 1 --rate RATE [EXTRA] --json --dir WORKDIR``; yield its JSON line.

    ``pid`` is added to it (the cluster's processes are that process's children).
    SIGTERM on the way out; with ``check_exit`` it must exit 0 (the assertion
    shows the end of ``WORKDIR/up.log``).
    """
    log_path = workdir / "up.log"
    log = open(log_path, "w")  # noqa: SIM115 - closed in finally
    argv = ["up", "--channels", "1", "--rate", f"{rate:g}", *extra, "--json", "--dir", str(workdir)]
    proc = JsonProcess.python("feedha-up", "feedha", argv, log=log)
    try:
        described = proc.wait_for(lambda e: "admin" in e, start_s)
        described["pid"] = proc.popen.pid
        yield described
    finally:
        rc = proc.stop(timeout=30)
        log.close()
        if check_exit:
            assert rc == 0, log_path.read_text()[-2000:]


def user_key(up: dict[str, Any], user: str) -> tuple[str, str]:
    """The key id and secret of one of the users ``feedha up`` made (``subscriber``, ``operator`` ...)."""
    key = json.loads(Path(up["users"][user]).read_text())
    return key["key_id"], key["secret"]


def feedctl(up: dict[str, Any], user: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``feedctl --admin-server ADMIN ARGS`` as ``user`` (credentials in the environment, as documented)."""
    key_id, secret = user_key(up, user)
    env = {**os.environ, "FEEDHA_KEY_ID": key_id, "FEEDHA_SECRET": secret}
    command = [sys.executable, "-m", "feedha.admin_server.feedctl", "--admin-server", up["admin"], *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def failover(up: dict[str, Any], channel: str, *, timeout: float = 60.0) -> None:
    """``feedctl failover CHANNEL --wait TIMEOUT`` as the operator: it must go through.

    The registry refuses a failover while the previous one is not reported done
    (``FAILOVER_IN_PROGRESS``) and while no backup is reported in sync
    (``NOT_IN_SYNC``: the first messages have not been confirmed yet, or a freeze
    just ended); ``--wait`` asks again meanwhile.
    """
    done = feedctl(up, "operator", "failover", channel, "--wait", f"{timeout:g}")
    assert done.returncode == 0, done.stderr
