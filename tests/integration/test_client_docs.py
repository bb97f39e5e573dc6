"""docs/client.md's examples, run as they are written, against local clusters: the page cannot rot.

Every ```` ```python ```` block of docs/client.md runs. The first (under "The
examples": it reads the key file) opens each section's script, followed by
that section's blocks; each section runs as ``python -W error SCRIPT`` in a
process of its own, as a reader would run it. The reader's cluster is
``feedha up --channels 1 --dir cluster``, and so is the test's: the scripts
run in the folder that holds ``cluster`` with no ``FEEDHA_KEY_FILE``, so the
page's default path is tried too. "Books" needs a ``fix44`` channel, which
``feedha up`` does not run: that section runs against
tests/integration/book_cluster.py's, named by ``FEEDHA_KEY_FILE``, while its
capture plays. Each section must exit 0 and print what :data:`EXPECT` says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fix44_capture import make_capture
from tests.integration.book_cluster import BookCluster, book_cluster
from tests.integration.up import feedha_up

pytestmark = pytest.mark.timeout(240)
PAGE = Path(__file__).resolve().parents[2] / "docs" / "client.md"
SETTING = "The examples"
BOOKS = "Books"
# What each section's script must print (beside exiting 0): facts its example shows.
EXPECT: dict[str, tuple[str, ...]] = {
    "Log in and subscribe": ("EQ-A-Z ('A*', 'B*') on 3 lines", "('A*', 'B*', 'MSFT')"),
    "Deliveries": ("in the next poll; 0 lost",),
    "Status events": ("status events so far:",),
    "Errors": (
        "refused: UNAUTHENTICATED",
        "refused: PERMISSION_DENIED SYMBOLS_NOT_ENTITLED ('AAPL', 'MSFT')",
    ),
    "Images: joining late": ("symbols' state at msg_seq",),
    "Replay by time": ("messages of A* and B* from", "events, paced"),
    "Conflation: a reader that falls behind": (
        "behind: conflated lines",
        "current again after",
        "as of msg_seq",
    ),
    BOOKS: ("bids", "asks, volume"),
    "The async twin": ("live,", "replayed;"),
}


def sections() -> dict[str, list[str]]:
    """The page's python blocks by ``##`` section, in order."""
    found: dict[str, list[str]] = {}
    title, block = "", None
    for line in PAGE.read_text().splitlines(keepends=True):
        if block is not None:
            if line.rstrip() == "```":
                found.setdefault(title, []).append("".join(block))
                block = None
            else:
                block.append(line)
        elif line.startswith("## "):
            title = line[3:].strip()
        elif line.rstrip() == "```python":
            block = []
    assert block is None, "a python block is never closed"
    return found


BLOCKS = sections()


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("docs")
    (root / "cluster").mkdir()
    with feedha_up(root / "cluster", rate=1000) as described:
        described["root"] = root
        yield described


@pytest.fixture(scope="module")
def books(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookCluster]:
    capture = make_capture(symbols=60, messages=6000, seed=5)  # 12 s at 500/s: live while the section runs
    with book_cluster(tmp_path_factory.mktemp("docs-books"), capture, rate=500) as cluster:
        key = {"admin": cluster.admin.target, "key_id": cluster.keys["trader"][0]}
        key["secret"] = cluster.keys["trader"][1]
        (cluster.workdir / "trader.json").write_text(json.dumps(key))
        yield cluster


def _run(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    path = cwd / "example.py"
    path.write_text(script)
    command = [sys.executable, "-W", "error", str(path)]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_every_section_with_code_is_checked_and_the_setting_comes_first() -> None:
    assert next(iter(BLOCKS)) == SETTING and len(BLOCKS[SETTING]) == 1
    assert set(BLOCKS) - {SETTING} == set(EXPECT), "a section was added or renamed: say what it prints"


# The sections with the longest runs (a book cluster playing a capture, a reader
# kept behind, the async twin) run in the slow stage; the default suite keeps
# the others, which exercise the same setting block, login, subscription,
# replay, images and errors against the same cluster.
SLOW_SECTIONS = frozenset({BOOKS, "The async twin", "Conflation: a reader that falls behind", "Deliveries"})


@pytest.mark.parametrize(
    "title",
    [pytest.param(t, marks=[pytest.mark.slow] if t in SLOW_SECTIONS else []) for t in BLOCKS if t != SETTING],
)
def test_the_section_runs_as_written(title: str, request: pytest.FixtureRequest) -> None:
    script = "\n".join([*BLOCKS[SETTING], *BLOCKS[title]])
    env = {k: v for k, v in os.environ.items() if k != "FEEDHA_KEY_FILE"}
    if title == BOOKS:
        cluster: BookCluster = request.getfixturevalue("books")
        cluster.play()
        cwd, env["FEEDHA_KEY_FILE"] = cluster.workdir, str(cluster.workdir / "trader.json")
    else:
        cwd = request.getfixturevalue("up")["root"]
    done = _run(script, cwd, env)
    print(done.stdout)  # what a reader sees (pytest -rP shows it)
    assert done.returncode == 0, f"{title}:\n{done.stdout}\n{done.stderr}"
    for text in EXPECT[title]:
        assert text in done.stdout, f"{title}: {text!r} not printed:\n{done.stdout}\n{done.stderr}"
