"""The command-line conventions: --help exits 0 everywhere, --version, options anywhere, config files,
FEEDHA_* variables, JSON logs, and a clear word (exit 2) for a missing extra."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from feedha import cli, extras
from feedha.admin_server import feedctl
from feedha.cluster import control, plan_group
from feedha.ports import free_ports
from feedha.procs import JsonProcess
from tests.integration.test_admin_processes import CONFIG, add_user
from tests.integration.test_admin_server import POLICY

BIN = Path(sys.executable).parent


def _help(main: object, argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = main(argv)  # type: ignore[operator]
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue()


def _sub_commands(help_text: str) -> list[str]:
    # The first {a,b,c} among the positional arguments lists the sub-commands (or a positional's choices).
    _head, _found, positionals = help_text.partition("positional arguments:")
    match = re.search(r"^\s+\{([a-z0-9_,-]+)\}", positionals, re.MULTILINE)
    return match.group(1).split(",") if match else []


def _every_command() -> Iterator[list[str]]:
    for name in cli.COMMANDS:
        yield [name]
        code, text = _help(cli.main, [name, "--help"])
        for sub in _sub_commands(text):
            yield [name, sub]


@pytest.mark.parametrize("command", list(_every_command()), ids=" ".join)
def test_help_exits_0_for_every_command_and_sub_command(command: list[str]) -> None:
    code, text = _help(cli.main, [*command, "--help"])
    assert code == 0, command
    assert "usage:" in text


@pytest.mark.parametrize("command", ["", *_sub_commands(_help(feedctl.main, ["--help"])[1])])
def test_feedctl_help_exits_0(command: str) -> None:
    code, text = _help(feedctl.main, [*([command] if command else []), "--help"])
    assert code == 0 and "usage: feedctl" in text


def test_version_of_feedha_and_feedctl() -> None:
    version = extras.version()
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", version)
    for command in (["feedha", "--version"], ["feedctl", "--version"]):
        done = subprocess.run([str(BIN / command[0]), command[1]], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and version in done.stdout, done


def test_a_missing_extra_is_named_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(extras, "_is_installed", lambda name: name not in ("pyspark", "argon2-cffi"))
    assert cli.main(["feed", "--help"]) == 2
    err = capsys.readouterr().err
    assert "[spark]" in err and "pyspark" in err and "pip install 'feedha[spark]'" in err
    assert cli.main(["up"]) == 2
    assert "pip install 'feedha[adapter,admin]'" in capsys.readouterr().err
    assert extras.missing(["all"]) == ["argon2-cffi", "pyspark"]  # followed through feedha[...]
    assert cli.main(["subscribe", "--help"]) == 0  # the base install's command


@pytest.fixture
def admin(tmp_path: Path) -> Iterator[tuple[str, Path, list[dict[str, object]]]]:
    """An admin server from a config file and a FEEDHA_ variable, logging JSON: (target, workdir, records)."""
    # The file's keys are the options' names; `listen` is the older form of host + port.
    (tmp_path / "admin.yaml").write_text(CONFIG + "listen: 127.0.0.1:1\ntoken_ttl: 600\nlog_format: json\n")
    (tmp_path / "policy.yaml").write_text(POLICY)
    env = {**os.environ, "FEEDHA_PORT": "0"}  # the variable overrides the file: any free port
    process = subprocess.Popen(
        [str(BIN / "feedha"), "admin-server", "--config", str(tmp_path / "admin.yaml")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None and process.stderr is not None
    try:
        line = process.stdout.readline()
        match = re.fullmatch(r"listening on 127.0.0.1:(\d+)\n", line)
        assert match and match.group(1) not in ("0", "1", "50051"), line
        yield f"127.0.0.1:{match.group(1)}", tmp_path, [json.loads(process.stderr.readline())]
    finally:
        process.kill()
        process.communicate(timeout=30)


def test_admin_server_from_a_config_file_and_variables_logs_json(
    admin: tuple[str, Path, list[dict[str, object]]],
) -> None:
    _target, _workdir, records = admin
    (first,) = records  # the first record of a fresh server: its new signing key
    assert first["level"] == "INFO" and "signing key" in str(first["message"])
    assert str(first["logger"]).startswith("feedha.admin_server") and str(first["ts"]).endswith("Z")


def test_feedctl_takes_its_options_before_or_after_the_command(
    admin: tuple[str, Path, list[dict[str, object]]],
) -> None:
    target, workdir, _records = admin
    key_id, secret = add_user(workdir, "ops", "--admin")
    env = {**os.environ, "FEEDHA_KEY_ID": key_id, "FEEDHA_SECRET": secret}
    for argv in (
        ["--json", "--admin-server", target, "adapters"],
        ["adapters", "--json", "--admin-server", target],
        ["--admin-server", "127.0.0.1:1", "subscriptions", "--admin-server", target, "--json"],
    ):
        done = subprocess.run(
            [str(BIN / "feedctl"), *argv], capture_output=True, text=True, env=env, timeout=60
        )
        assert done.returncode == 0, (argv, done.stderr)
        assert json.loads(done.stdout) == []
    # admin-server's own --config goes before add-user as well as after it
    before = subprocess.run(
        [str(BIN / "feedha"), "admin-server", "--config", str(workdir / "admin.yaml"), "add-user", "bob"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert before.returncode == 0 and "key_id: fk_" in before.stdout, before.stderr
    done = subprocess.run(
        [str(BIN / "feedctl"), "--admin-server", target, "subscriptions"],
        capture_output=True,
        text=True,
        env={**env, "FEEDHA_JSON": "1"},  # every option is a variable too
        timeout=60,
    )
    assert done.returncode == 0 and json.loads(done.stdout) == [], done.stderr


def test_one_config_file_serves_a_whole_adapter_group(tmp_path: Path) -> None:
    """Two adapters share a config file; what differs (number, line) comes from FEEDHA_* variables."""
    source_endpoint = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    group = plan_group(
        channel="EQ-CF",
        channel_number=4,
        source_endpoint=source_endpoint,
        source_stream="A-Z",
        source_stream_number=1,
        size=2,
    )
    peers = [f"{a.adapter}={a.sync}" for a in group.adapters]
    (tmp_path / "adapter.yaml").write_text(
        "channel: EQ-CF\nchannel_number: 4\n"
        f"source: {source_endpoint}\nsource_stream: A-Z\nsource_stream_number: 1\n"
        f"peer: {json.dumps(peers)}\nactive_adapter: 1\nheartbeat_timeout: 0.4\nlog_format: json\n"
    )
    procs: list[JsonProcess] = []
    try:
        for plan in group.adapters:
            env = {
                "FEEDHA_ADAPTER": str(plan.adapter),
                "FEEDHA_LINE": plan.line,
                "FEEDHA_SYNC": plan.sync,
                "FEEDHA_CONTROL": plan.control,
                "FEEDHA_LOG_LEVEL": "info",
            }
            argv = ["--config", str(tmp_path / "adapter.yaml")]
            log = open(tmp_path / f"adapter-{plan.adapter}.log", "w")  # noqa: SIM115 - closed below
            procs.append(
                JsonProcess.python(f"adapter-{plan.adapter}", "feedha.adapter", argv, env=env, log=log)
            )
            log.close()
        for proc in procs:
            proc.wait_event("ready", 30)
        source = JsonProcess.python(
            "source",
            "feedha.plain_source",
            [
                "--endpoint",
                f"A-Z={source_endpoint}",
                "--rate",
                "2000",
                "--seconds",
                "20",
                "--wait-subscribers",
                "2",
            ],
        )
        procs.append(source)
        deadline_status = _wait(lambda: control(group.adapter(2).control, "status"), "in_sync", 30)
        assert deadline_status["role"] == "backup" and deadline_status["active"] == 1
        assert control(group.adapter(1).control, "status")["role"] == "active"
    finally:
        for proc in procs:
            proc.kill()
    records = [json.loads(line) for line in (tmp_path / "adapter-1.log").read_text().splitlines() if line]
    assert records and all({"ts", "level", "logger", "message"} <= set(r) for r in records)


def _wait(read: object, status: str, timeout: float) -> dict[str, object]:
    import time

    deadline = time.monotonic() + timeout
    last: dict[str, object] = {}
    while time.monotonic() < deadline:
        last = read()  # type: ignore[operator]
        if last.get("status") == status:
            return last
        time.sleep(0.05)  # poll interval of a deadline-bounded wait
    raise AssertionError(f"never {status}: {last}")
