"""``feedha up`` as a user runs it: every metrics URL, and the status page in a real headless Chromium.

The browser logs in through the one-time link ``feedha up`` prints, sees the
adapters' roles, an operator fails the channel over with ``feedctl``, and
the page changes by itself (server-sent events). Screenshots are kept under
``results/status-page/`` (and the test's tmp_path).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from feedha.client import FeedClient
from tests.integration.up import failover, feedha_up
from tests.integration.waiting import wait_until

pytestmark = pytest.mark.timeout(300)

CHROMIUM = shutil.which("chromium")
DRIVER = shutil.which("chromedriver")
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "results" / "status-page"
_SUBSCRIBERS_JS = "const v = document.querySelector('.fact-subscribers .value'); return v && v.textContent"
_ROLES_JS = (
    "return Array.from(document.querySelectorAll('tr[data-adapter]'))"
    ".map(r => [r.dataset.adapter, r.dataset.role])"
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("up")
    with feedha_up(workdir, rate=500, check_exit=True) as described:
        yield described, workdir


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_every_metrics_url_answers_prometheus_text(cluster):
    described, _workdir = cluster
    assert len(described["metrics"]) == 4  # the admin server and three adapters
    names: set[str] = set()
    for url in described["metrics"]:
        status, body = _get(url)
        assert status == 200
        names |= {line.split()[2] for line in body.splitlines() if line.startswith("# TYPE ")}
        base = url.removesuffix("/metrics")
        assert _get(base + "/healthz")[0] == 200
    feedha = {name for name in names if name.startswith("feedha_")}
    assert len(names) >= 20 and len(feedha) >= 20, sorted(names)
    for needed in (
        "feedha_adapter_role",
        "feedha_adapter_journal_fsync_seconds",
        "feedha_admin_logins_total",
    ):
        assert needed in names
    # Every daemon metric the Grafana dashboard plots exists.
    dashboard = (ROOT / "deploy" / "grafana" / "feedha-dashboard.json").read_text()
    plotted = {
        re.sub(r"_(bucket|sum|count)$", "", n) for n in re.findall(r"feedha_(?:adapter|admin)_\w+", dashboard)
    }
    assert plotted and plotted <= names, plotted - names

    # Ready once the adapters decided their roles and the backups are in sync (all publish).
    def all_ready():
        return all(_get(url.removesuffix("/metrics") + "/readyz")[0] == 200 for url in described["metrics"])

    _wait(all_ready, 60, "every daemon's /readyz")


def _browser(profile: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--window-size=1400,1000",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(DRIVER))


def _wait(predicate, timeout: float, what: str):
    return wait_until(predicate, timeout, what, interval=0.2)  # a browser's DOM: no event reaches us


@pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="no Chromium here: scripts/setup installs Debian's chromium and chromium-driver",
)
@pytest.mark.slow  # 8 s: in CI's slow stage; the default keeps every metrics URL's answer
def test_the_status_page_shows_roles_and_a_failover(cluster, tmp_path):
    described, workdir = cluster
    link = described["status_page"]
    assert _get(link.split("/login")[0] + "/")[0] == 401  # nothing without logging in
    driver = _browser(tmp_path / "profile")
    stack = contextlib.ExitStack()
    try:
        driver.get(link)
        roles = _wait(lambda: dict(driver.execute_script(_ROLES_JS)), 30, "the adapters on the page")
        assert sorted(roles.values()) == ["active", "backup", "backup"], roles
        assert driver.current_url.endswith("/"), "the token must leave the address bar"
        assert "active" in driver.page_source and "backup" in driver.page_source
        before = next(adapter for adapter, role in roles.items() if role == "active")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(tmp_path / "before.png"))
        # A subscriber appears on the page.
        key = json.loads(Path(described["users"]["subscriber"]).read_text())
        client = FeedClient(described["admin"], key["key_id"], key["secret"], retry_deadline_s=20)
        stack.callback(client.close)
        client.subscribe(["*"])
        _wait(lambda: driver.execute_script(_SUBSCRIBERS_JS) == "1", 30, "one subscriber on the page")

        failover(described, described["channels"][0]["name"])

        def promoted():
            now = dict(driver.execute_script(_ROLES_JS))
            history = driver.find_elements("css selector", "#failovers tbody tr")
            new = [a for a, role in now.items() if role == "active" and a != before]
            return new and now.get(before) != "active" and history and new[0]

        after = _wait(promoted, 60, "the failover on the page")
        assert after != before
        shot = tmp_path / "after.png"
        driver.save_screenshot(str(shot))
        shutil.copy(shot, ARTIFACTS / "after-failover.png")
        shutil.copy(tmp_path / "before.png", ARTIFACTS / "before-failover.png")
        cookie = driver.get_cookie("feedha_session")
        assert cookie is not None and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    finally:
        driver.quit()
        stack.close()
    # The link was one-time: a second use is refused, and the token is in no log.
    assert _get(link)[0] == 403
    token = link.split("token=")[1]
    for log in (workdir / "components.log", workdir / "up.log"):
        if log.exists():
            assert token not in log.read_text()
