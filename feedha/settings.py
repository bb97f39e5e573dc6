"""A command's settings from its flags, a YAML config file and ``FEEDHA_*`` environment variables.

Every daemon (``feedha adapter``, ``feedha admin-server``, ``feedha source``,
``feedha feed``) and ``feedha subscribe``/``feedctl`` build their settings here,
from their own :mod:`argparse` parser, so a flag added to a parser later is at
once a config key and an environment variable -- nothing lists them twice.

Theory of operation
-------------------
Each option of the parser (``--channel-number``, dest ``channel_number``) can
be set three more ways, lowest precedence first:

1. its default;
2. the config file (``--config FILE``, or ``$FEEDHA_CONFIG``): a YAML mapping
   whose keys are the options' names, with ``_`` or ``-`` (``channel_number: 1``);
   a list for a repeatable option; ``true``/``false`` for a switch. A relative
   path is relative to the file. Unknown keys are refused (with the nearest
   known one), so a typo never passes silently. A command may declare
   *sections*: keys that are not flags (the admin server's ``feeds``), which
   it reads itself;
3. the environment: ``FEEDHA_`` and the dest in capitals
   (``FEEDHA_CHANNEL_NUMBER=1``); a repeatable option takes a comma-separated
   list; a switch takes ``1/true/yes/on`` or ``0/false/no/off``. A command can
   keep an option out of the environment (``no_env``) where inheriting it would
   surprise (a drill-only switch);
4. the command line, which always wins: a repeatable option given there
   replaces the file's list instead of adding to it.

Only the command's own options are settings: a sub-command's options (``add-user
--group``, ``feedctl failover --to``) describe one invocation and are given on
the command line.

The values of (2) and (3) are checked and converted with the option's own
``type`` and ``choices`` and become the parser's defaults (an option that is
``required`` is satisfied by them); argparse then parses the command line as
usual. A bad value exits 2 with the file and key, or the variable, named.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NoReturn

from feedha import logs

ENV_PREFIX: Final = "FEEDHA_"
CONFIG_ENV: Final = "FEEDHA_CONFIG"
_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off", ""})
_NOT_SETTINGS: Final = frozenset({"help", "version", "config"})


@dataclass(frozen=True, slots=True)
class Settings:
    """What :func:`parse` found.

    Attributes:
        args: the parsed arguments, as ``parser.parse_args`` returns them.
        config_file: the config file read, if any.
        sections: the file's keys that are not options (declared by the command), as written.
        origins: dest -> where its value came from: the file (``"FILE: key"``) or
            the variable (``"FEEDHA_X"``); options left to the command line or
            their default are absent.
    """

    args: argparse.Namespace
    config_file: Path | None = None
    sections: Mapping[str, Any] = field(default_factory=dict)
    origins: Mapping[str, str] = field(default_factory=dict)


class _FromConfig(list[Any]):
    """A repeatable option's list from the file or environment.

    argparse's ``append`` copies the default before adding a command-line
    value; copying this list gives an empty one, so the command line
    replaces it instead of extending it.
    """

    def __copy__(self) -> list[Any]:
        return []


def add_common_arguments(
    parser: argparse.ArgumentParser, *, log_level: str = "INFO", config: bool = True
) -> None:
    """Declare ``--config``, ``--log-level`` and ``--log-format`` on a command's parser.

    Args:
        parser: the command's parser.
        log_level: the default logging level.
        config: whether the command takes a config file.
    """
    if config:
        parser.add_argument(
            "--config",
            type=Path,
            metavar="FILE",
            help="YAML file of settings: keys are the options' names (channel_number: 1); "
            "FEEDHA_<OPTION> variables override it and flags override both",
        )
    logs.add_arguments(parser, default_level=log_level)


def share_options(parser: argparse.ArgumentParser, dests: Sequence[str] | None = None) -> None:
    """Accept the main parser's options after any sub-command too (``feedctl adapters --json``).

    Call it once every sub-command is declared. A copy given after the
    sub-command wins over the same option given before it.

    Args:
        parser: the main parser.
        dests: the options to share, by dest (default: every option but ``--help``).
    """
    shared = [
        action
        for action in parser._actions
        if action.option_strings
        and not isinstance(action, argparse._HelpAction | argparse._VersionAction)
        and (dests is None or action.dest in dests)
    ]
    for sub in _parsers(parser):
        if sub is parser:
            continue
        taken = {option for action in sub._actions for option in action.option_strings}
        for action in shared:
            if taken.isdisjoint(action.option_strings):
                twin = copy.copy(action)
                twin.default, twin.required = argparse.SUPPRESS, False
                if twin.help not in (None, argparse.SUPPRESS):  # its help may show the default
                    twin.help = str(twin.help).replace("%(default)s", str(action.default))
                sub._add_action(twin)


def parse(
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    sections: frozenset[str] = frozenset(),
    no_env: frozenset[str] = frozenset(),
    rewrite: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> Settings:
    """Parse ``argv`` over the config file and the environment (see the module's docstring).

    Args:
        parser: the command's parser (its defaults are changed: build one per call).
        argv: the arguments; ``sys.argv[1:]`` when None.
        environ: the environment; ``os.environ`` when None.
        sections: config-file keys that are not options, returned as they are.
        no_env: dests that no environment variable may set.
        rewrite: turns the file's mapping (keys normalized) into option keys, for
            file keys kept for compatibility (e.g. ``listen: HOST:PORT``).

    Returns:
        The arguments and where they came from.

    Raises:
        SystemExit: exit 2 on a bad file, key, value or argument (argparse's way).
    """
    environ = os.environ if environ is None else environ
    actions = dict(_settable(parser))
    path = _config_path(parser, argv, environ)
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    found_sections: dict[str, Any] = {}
    if path is not None:
        raw = _read_file(parser, path)
        if rewrite is not None:
            try:
                raw = rewrite(raw)
            except ValueError as exc:
                parser.error(f"{path}: {exc}")
        for key, value in raw.items():
            if key in sections:
                found_sections[key] = value
            elif key in actions:
                origin = f"{path}: {key}"
                values[key] = _convert(parser, actions[key], value, origin=origin, base=path.parent)
                origins[key] = origin
            else:
                _unknown_key(parser, path, key, [*actions, *sections])
    for dest, action in actions.items():
        name = ENV_PREFIX + dest.upper()
        if dest not in no_env and name in environ:
            values[dest] = _convert(parser, action, environ[name], origin=name, base=None)
            origins[dest] = name
    _apply(parser, values)
    args = parser.parse_args(argv)
    for dest, value in vars(args).items():
        if isinstance(value, _FromConfig):
            setattr(args, dest, list(value))
    return Settings(args=args, config_file=path, sections=found_sections, origins=origins)


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases map to the same parser
                yield from _parsers(sub)


def _settable(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.Action]]:
    # The main parser's options only: a sub-command's own options (add-user --group,
    # feedctl failover --to) are what one invocation does, not settings of the command.
    seen: set[str] = set()
    for action in parser._actions:
        if (
            not action.option_strings
            or action.dest in _NOT_SETTINGS
            or action.dest == argparse.SUPPRESS
            or action.dest in seen
            or _kind(action) is None
        ):
            continue
        seen.add(action.dest)
        yield action.dest, action


def _kind(action: argparse.Action) -> str | None:
    if isinstance(
        action, argparse._StoreTrueAction | argparse._StoreFalseAction | argparse.BooleanOptionalAction
    ):
        return "switch"
    if isinstance(action, argparse._AppendAction | argparse._ExtendAction) or action.nargs in ("+", "*"):
        return "list"
    if isinstance(action, argparse._CountAction):
        return "count"
    if isinstance(action, argparse._StoreAction) and action.nargs in (None, "?"):
        return "value"
    return None  # store_const, version, help, nargs=N: not settings


def _config_path(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None, environ: Mapping[str, str]
) -> Path | None:
    if not any(action.dest == "config" for each in _parsers(parser) for action in each._actions):
        return None
    early = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    early.add_argument("--config", type=Path)
    known, _rest = early.parse_known_args(argv)
    if known.config is not None:
        config: Path = known.config
        return config
    from_env = environ.get(CONFIG_ENV)
    return Path(from_env) if from_env else None


def _read_file(parser: argparse.ArgumentParser, path: Path) -> dict[str, Any]:
    try:
        import yaml
    except ModuleNotFoundError:
        parser.error(f"reading {path} needs PyYAML: pip install 'feedha[adapter]'")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        parser.error(f"cannot read config file {path}: {exc.strerror}")
    except yaml.YAMLError as exc:
        parser.error(f"config file {path} is not valid YAML: {exc}")
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(key, str) for key in raw):
        parser.error(f"config file {path} must be a mapping of option names to values")
    return {key.replace("-", "_"): value for key, value in raw.items()}


def _unknown_key(parser: argparse.ArgumentParser, path: Path, key: str, known: list[str]) -> NoReturn:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else f"; known keys: {', '.join(sorted(known))}"
    parser.error(f"{path}: unknown key {key!r}{hint}")


def _convert(
    parser: argparse.ArgumentParser, action: argparse.Action, raw: Any, *, origin: str, base: Path | None
) -> Any:
    kind = _kind(action)
    if kind == "switch":
        return _switch(parser, raw, origin)
    if kind == "count":
        if isinstance(raw, bool) or not isinstance(raw, int | str) or not str(raw).isdigit():
            parser.error(f"{origin}: expected a count (0, 1, 2 ...), got {raw!r}")
        return int(raw)
    if kind == "list":
        if isinstance(raw, str) and base is None:  # a variable: comma-separated
            items: list[Any] = [item.strip() for item in raw.split(",") if item.strip()]
        else:
            items = list(raw) if isinstance(raw, list) else [raw]
        return _FromConfig(_value(parser, action, item, origin=origin, base=base) for item in items)
    return _value(parser, action, raw, origin=origin, base=base)


def _switch(parser: argparse.ArgumentParser, raw: Any, origin: str) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    parser.error(f"{origin}: expected true or false, got {raw!r}")


def _value(
    parser: argparse.ArgumentParser, action: argparse.Action, raw: Any, *, origin: str, base: Path | None
) -> Any:
    convert: Callable[[str], Any] = action.type if callable(action.type) else str
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        parser.error(f"{origin}: expected a single value, got {raw!r}")
    try:
        if convert in (int, float) and not isinstance(raw, str):
            if convert is int and raw != int(raw):
                raise ValueError("not a whole number")
            value = convert(raw)
        else:
            value = convert(str(raw))
    except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
        parser.error(f"{origin}: invalid value {raw!r}: {exc}")
    if action.choices is not None and value not in action.choices:
        choices = ", ".join(map(str, action.choices))
        parser.error(f"{origin}: invalid choice {raw!r} (choose from {choices})")
    if isinstance(value, Path) and base is not None and not value.is_absolute():
        value = base / value
    return value


def _apply(parser: argparse.ArgumentParser, values: Mapping[str, Any]) -> None:
    # Set on the main parser only: a sub-command's copy of an option (share_options)
    # defaults to SUPPRESS, so a value given before the sub-command stands.
    own = {action.dest: action for action in parser._actions}
    for dest in values:
        own[dest].required = False  # satisfied by the file or the environment
    parser.set_defaults(**values)
