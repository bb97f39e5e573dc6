"""feedha.settings: flags over FEEDHA_* variables over the config file over defaults, for any parser."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import pytest

from feedha import logs, settings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="demo")
    parser.add_argument("--channel", required=True)
    parser.add_argument("--channel-number", type=int, default=0)
    parser.add_argument("--rate", type=float, default=1.0)
    parser.add_argument("--peer", action="append", default=[])
    parser.add_argument("--journal", type=Path)
    parser.add_argument("--active", action="store_true")
    parser.add_argument("--fsync", choices=("none", "batch"), default="batch")
    parser.add_argument("--drill-only", action="store_true")
    settings.add_common_arguments(parser)
    return parser


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "conf" / "demo.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_the_file_sets_every_option_by_its_name_with_dashes_or_underscores(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "channel: EQ-A-M\nchannel-number: 3\nrate: 2\npeer: [a, b]\njournal: j\nactive: true\nfsync: none\n",
    )
    found = settings.parse(_parser(), ["--config", str(path)], environ={})
    args = found.args
    assert (args.channel, args.channel_number, args.rate, args.peer) == ("EQ-A-M", 3, 2.0, ["a", "b"])
    assert type(args.peer) is list and isinstance(args.rate, float)
    assert args.journal == path.parent / "j"  # relative to the file
    assert args.active is True and args.fsync == "none"
    assert found.config_file == path
    assert found.origins["channel_number"] == f"{path}: channel_number"


def test_variables_override_the_file_and_flags_override_both(tmp_path: Path) -> None:
    path = _write(tmp_path, "channel: FILE\nchannel_number: 1\nrate: 5\npeer: [f1, f2]\nactive: true\n")
    environ = {"FEEDHA_CHANNEL_NUMBER": "2", "FEEDHA_PEER": "e1, e2", "FEEDHA_ACTIVE": "off"}
    args = settings.parse(
        _parser(), ["--config", str(path), "--rate", "7", "--peer", "cli"], environ=environ
    ).args
    assert args.channel == "FILE"
    assert args.channel_number == 2  # variable over file
    assert args.rate == 7.0  # flag over file
    assert args.peer == ["cli"]  # a repeatable flag replaces the list, it does not add to it
    assert args.active is False
    args = settings.parse(_parser(), ["--config", str(path)], environ=environ).args
    assert args.peer == ["e1", "e2"] and args.journal is None  # relative paths from variables stay as given


def test_the_config_file_may_come_from_feedha_config(tmp_path: Path) -> None:
    path = _write(tmp_path, "channel: X\n")
    args = settings.parse(_parser(), [], environ={"FEEDHA_CONFIG": str(path)}).args
    assert args.channel == "X" and args.config is None


def test_required_options_are_still_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        settings.parse(_parser(), [], environ={})
    assert exc.value.code == 2
    assert "--channel" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "environ", "message"),
    [
        ("chanel: x\n", {}, "unknown key 'chanel' (did you mean 'channel'?)"),  # codespell:ignore
        ("channel_number: many\n", {}, "channel_number: invalid value 'many'"),
        ("channel_number: 2.5\n", {}, "channel_number: invalid value 2.5"),
        ("fsync: always\n", {}, "fsync: invalid choice 'always'"),
        ("active: perhaps\n", {}, "active: expected true or false"),
        ("channel: [a, b]\n", {}, "channel: expected a single value"),
        ("- a\n- b\n", {}, "must be a mapping"),
        ("channel: [\n", {}, "not valid YAML"),
        ("channel: x\n", {"FEEDHA_RATE": "fast"}, "FEEDHA_RATE: invalid value 'fast'"),
    ],
)
def test_bad_values_exit_2_naming_the_key_or_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, environ: dict[str, str], message: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(SystemExit) as exc:
        settings.parse(_parser(), ["--config", str(path)], environ=environ)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_a_missing_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        settings.parse(_parser(), ["--config", str(tmp_path / "nope.yaml")], environ={})
    assert "cannot read config file" in capsys.readouterr().err


def test_no_env_keeps_an_option_out_of_the_environment() -> None:
    environ = {"FEEDHA_CHANNEL": "E", "FEEDHA_DRILL_ONLY": "1"}
    args = settings.parse(_parser(), [], environ=environ, no_env=frozenset({"drill_only"})).args
    assert args.channel == "E" and args.drill_only is False


def test_sections_and_renamed_keys(tmp_path: Path) -> None:
    path = _write(tmp_path, "listen: 10.0.0.1:99\nfeeds: [{name: EQ}]\n")

    def rewrite(raw: dict[str, object]) -> dict[str, object]:
        host, _colon, port = str(raw.pop("listen")).rpartition(":")
        return {**raw, "channel": host, "channel_number": port}

    found = settings.parse(
        _parser(), ["--config", str(path)], environ={}, sections=frozenset({"feeds"}), rewrite=rewrite
    )
    assert (found.args.channel, found.args.channel_number) == ("10.0.0.1", 99)
    assert found.sections == {"feeds": [{"name": "EQ"}]}


def _ctl() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctl")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--database", type=Path)
    settings.add_common_arguments(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser("add-user")
    add.add_argument("name")
    add.add_argument("--group", action="append", default=[])
    settings.share_options(parser)
    return parser


def test_shared_options_follow_a_sub_command_and_the_file_does_not_override_them(tmp_path: Path) -> None:
    path = _write(tmp_path, "database: from-file.sqlite\n")
    argv = ["--database", "cli.sqlite", "--config", str(path), "add-user", "bob"]
    before = settings.parse(_ctl(), argv, environ={"FEEDHA_GROUP": "traders"}).args
    assert before.database == Path("cli.sqlite") and before.group == [] and not before.json
    after = settings.parse(_ctl(), ["--config", str(path), "add-user", "bob", "--json"], environ={}).args
    assert after.json is True and after.database == path.parent / "from-file.sqlite"
    last = settings.parse(_ctl(), ["--database", "a", "add-user", "bob", "--database", "b"], environ={}).args
    assert last.database == Path("b")  # after the sub-command wins


def test_a_sub_command_s_own_options_are_no_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "group: [traders]\n")  # add-user --group: one invocation's, not a setting
    with pytest.raises(SystemExit):
        settings.parse(_ctl(), ["--config", str(path), "add-user", "bob"], environ={})
    assert "unknown key 'group'" in capsys.readouterr().err


def test_json_log_format_writes_one_object_per_record() -> None:
    import io

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter())
    logger = logging.getLogger("feedha.test.logs")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("promoted to %s at term %d", "active", 3)
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["message"] == "promoted to active at term 3" and first["level"] == "WARNING"
    assert first["logger"] == "feedha.test.logs" and first["ts"].endswith("Z")
    assert "RuntimeError: boom" in second["exc"]


def test_log_options_check_their_values(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="x")
    logs.add_arguments(parser)
    assert parser.parse_args(["--log-level", "debug"]).log_level == "DEBUG"
    with pytest.raises(SystemExit):
        parser.parse_args(["--log-level", "loud"])
    with pytest.raises(SystemExit):
        parser.parse_args(["--log-format", "xml"])
    with pytest.raises(ValueError, match="log_format"):
        logs.configure("INFO", "xml")
