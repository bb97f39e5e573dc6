"""Install it like a library: build the sdist and wheel, install the wheel in a fresh venv, use it.

Slow (a few minutes: two builds, a clean venv, then [all] with pyspark): run with the drills
(``make test-slow``, and CI). Everything runs outside the clone, so nothing can be imported
from the source tree by accident.

- ``python -m build`` makes an sdist and a wheel; the wheel holds the compiled extensions,
  the package data (converter table, demo policy, Spark sample ticks) and no top-level
  module but ``feedha``;
- without a compiler the build warns and makes a pure-Python wheel, which warns at run time;
- the base install is the client: no pyspark, pandas or pyarrow; ``import proto.message``
  (proto-plus, which every Google Cloud library depends on) and ``import feedha`` live side
  by side; ``feedha --version``; a command whose extra is missing says which, exit 2;
- with ``[all]``: ``feedha demo --source plain`` works outside the clone, and a subscriber
  from the venv reads a cluster the venv runs (``feedha up``), through the admin server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from feedha.procs import JsonProcess

ROOT = Path(__file__).resolve().parents[2]
EXTENSIONS = (
    "feedha/adapter/formats/feedha_fix/_fastpath",
    "feedha/adapter/conversion/_orders",
    "feedha/adapter/journal/_native",
)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def run(*argv: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 900) -> str:
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, (
        f"{argv}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout + done.stderr


def _clean_env() -> dict[str, str]:
    """This environment without the dev venv's traces (VIRTUAL_ENV, PYTHONPATH)."""
    return {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--outdir", out, ROOT, cwd=out)
    return out


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, dist: Path) -> Iterator[Path]:
    """A fresh venv (no system site packages) with the base wheel installed; its bin/ directory."""
    home = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", home / "v", cwd=home)
    (wheel,) = dist.glob("feedha-*.whl")
    run(home / "v/bin/python", "-m", "pip", "install", "-q", wheel, cwd=home, env=_clean_env())
    yield home / "v/bin"


def test_the_sdist_and_wheel_hold_what_they_must(dist: Path) -> None:
    (wheel,) = dist.glob("feedha-*.whl")
    (sdist,) = dist.glob("feedha-*.tar.gz")
    assert "-cp3" in wheel.name and "linux" in wheel.name  # a platform wheel: it has compiled parts
    names = zipfile.ZipFile(wheel).namelist()
    for extension in EXTENSIONS:
        assert any(n.startswith(extension) and n.endswith(".so") for n in names), extension
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"feedha"}
    for data in (
        "feedha/adapter/formats/feedha_fix/converters.yaml",
        "feedha/adapter/formats/feedha_fix/_fastpath.pyi",  # each extension's stub beside it
        "feedha/adapter/conversion/_orders.pyi",
        "feedha/adapter/journal/_native.pyi",
        "feedha/demo_policy.yaml",
        "feedha/client/py.typed",
        "feedha/proto/admin.proto",
    ):
        assert data in names, data
    assert any(n.startswith("feedha/spark_feed/sample/") and n.endswith(".csv") for n in names)
    import tarfile

    members = {m.split("/", 1)[1] for m in tarfile.open(sdist).getnames() if "/" in m}
    sources = {
        "adapter/formats/feedha_fix/_fastpath.c",
        "adapter/conversion/_market_fields.h",
        "adapter/conversion/_conversion_constants.h",
        "adapter/formats/feedha_fix/_fastpath_constants.h",
        "adapter/conversion/_orders.c",
        "adapter/formats/itch50/_order_table.c",  # _orders.c's parts, #included
        "adapter/formats/itch50/_mbo_run.c",
        "adapter/formats/itch50/_symbol_map.c",
        "adapter/formats/fix44/_book_table.c",
        "adapter/formats/fix44/_fix44_run.c",
        "adapter/conversion/_protowire.h",
        "adapter/conversion/_varint.h",
        "adapter/conversion/_blake2b.h",
        "adapter/conversion/_fix_checksum.h",
        "adapter/conversion/_siphash.h",
        "adapter/conversion/_level_tree.h",
        "adapter/journal/_native.c",
        "adapter/journal/_native_constants.h",
    }
    assert {"setup.py", "pyproject.toml", *sources} <= members


def test_without_a_compiler_the_build_warns_and_the_package_runs_in_pure_python(
    tmp_path: Path, venv: Path, dist: Path
) -> None:
    import tarfile

    # From the unpacked sdist, not the checkout: a build/ folder left in the checkout by an
    # earlier build holds compiled objects that setuptools would reuse without compiling.
    (sdist,) = dist.glob("feedha-*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path / "src", filter="data")
    (source,) = (tmp_path / "src").iterdir()
    out = tmp_path / "dist"
    env = {**_clean_env(), "CC": "false", "CXX": "false"}  # a compiler that always fails
    log = run(sys.executable, "-m", "build", "--wheel", "--outdir", out, source, cwd=tmp_path, env=env)
    assert "WARNING: could not build" in log and "pure-Python" in log
    (wheel,) = out.glob("feedha-*.whl")
    assert not any(n.endswith(".so") for n in zipfile.ZipFile(wheel).namelist())


def test_the_base_install_is_the_client_and_lives_beside_proto_plus(venv: Path, tmp_path: Path) -> None:
    env = _clean_env()
    installed = json.loads(run(venv / "python", "-m", "pip", "list", "--format=json", cwd=tmp_path, env=env))
    names = {p["name"].lower() for p in installed}
    assert not names & {"pyspark", "pandas", "pyarrow", "psutil", "argon2-cffi"}, names
    assert {"pyzmq", "grpcio", "grpcio-status", "protobuf"} <= names
    version = run(
        venv / "python", "-c", "import importlib.metadata as m; print(m.version('feedha'))", cwd=tmp_path
    )
    assert run(venv / "feedha", "--version", cwd=tmp_path, env=env).strip() == f"feedha {version.strip()}"
    run(venv / "python", "-m", "pip", "install", "-q", "proto-plus", cwd=tmp_path, env=env)
    both = (
        "import proto.message, feedha, feedha.proto.wire, feedha.client;"
        "from feedha.client import FeedClient, Subscriber;"
        "assert proto.message.Message.__module__ == 'proto.message';"
        "print(feedha.proto.wire.__name__, proto.__file__)"
    )
    out = run(venv / "python", "-c", both, cwd=tmp_path, env=env)
    assert "feedha.proto.wire" in out and "site-packages/proto/" in out
    for command in (["feedha", "subscribe", "--help"], ["feedctl", "--help"]):
        run(venv / command[0], *command[1:], cwd=tmp_path, env=env)
    missing = subprocess.run(
        [venv / "feedha", "adapter", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and "pip install 'feedha[adapter]'" in missing.stderr, missing.stderr
    assert "Traceback" not in missing.stderr


@pytest.fixture(scope="module")
def venv_all(venv: Path, dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    (wheel,) = dist.glob("feedha-*.whl")
    home = tmp_path_factory.mktemp("all")
    run(
        venv / "python",
        "-m",
        "pip",
        "install",
        "-q",
        f"{wheel}[all]",
        cwd=home,
        env=_clean_env(),
        timeout=1500,
    )
    return venv


def test_with_all_the_demo_runs_outside_the_clone(venv_all: Path, tmp_path: Path) -> None:
    demo = ["demo", "--source", "plain", "--seconds", "8", "--rate", "1000", "--backups", "1"]
    out = run(venv_all / "feedha", *demo, cwd=tmp_path, env=_clean_env(), timeout=600)
    assert "result: no message lost or repeated" in out, out[-3000:]


def test_a_subscriber_from_the_wheel_reads_a_cluster_from_the_wheel(venv_all: Path, tmp_path: Path) -> None:
    env = _clean_env()
    argv = [
        venv_all / "feedha",
        "up",
        "--channels",
        "1",
        "--rate",
        "2000",
        "--json",
        "--dir",
        tmp_path / "up",
    ]
    up = JsonProcess("up", [str(a) for a in argv], cwd=tmp_path)
    try:
        described = up.wait_for(lambda e: "admin" in e, 120)
        (channel,) = described["channels"]
        key_file = described["users"]["subscriber"]
        out = run(
            venv_all / "feedha", "subscribe", "--key-file", key_file, "--channel", channel["name"],
            "--count", "500", "--json", cwd=tmp_path, env=env, timeout=120,
        )  # fmt: skip
        deliveries = [
            json.loads(line) for line in out.splitlines() if line.startswith('{"event": "Delivery"')
        ]
        assert len(deliveries) == 500
        seqs = [d["msg_seq"] for d in deliveries]
        assert seqs == list(range(seqs[0], seqs[0] + 500))  # in order, nothing lost or repeated
    finally:
        up.popen.send_signal(signal.SIGTERM)
        try:
            up.popen.wait(timeout=60)
        finally:
            up.kill()
