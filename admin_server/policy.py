"""The authorization policy: who may see which symbols, real-time, delayed or conflated, and who is admin.

Theory of operation: the policy is a YAML file (``deploy/policy.yaml``) with
four sections::

    groups:                       # declared groups; roles: admin, adapter
      operators: {roles: [admin]}
      traders: {}
    users:                        # optional: groups and roles per user name
      alice: {groups: [traders]}
    rules:                        # grants, in any order
      - groups: [traders]         # and/or users: [...]
        symbols: ["A*", "MSFT"]   # fnmatch patterns, case-sensitive (see globs.py)
        mode: realtime            # or delayed, or conflated
    adapters:                     # who may register which adapters
      feed-eq-a: {channels: [EQ-A-M], ids: [1, 2, 3]}

An adapter registration names its channel and adapter id; the caller's user
must have a binding that lists the channel and the id, either exactly
(``"EQ-A-M.2"``) or as an adapter number (``2`` stands for ``<channel>.2``,
the id ``feedha adapter --adapter 2`` registers). A user without a binding
registers nothing, whatever its roles (:meth:`Policy.may_register`).

:func:`parse_policy` walks the composed YAML node tree (not the loaded
objects) so that every error names the line of the offending node. The
policy answers two questions, both pure: :meth:`Policy.entitlement` for one
requested symbol or pattern, :meth:`Policy.has_role` for operator calls.
A user's groups and roles are the union of the policy's and the key
store's (``feedha admin-server add-user --group G --admin``).

:class:`PolicyFile` keeps the last good policy and reloads it when the file's
mtime changes; a bad file is rejected (and reported) and the old policy stays.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import yaml

from feedha.admin_server import globs
from feedha.admin_server.errors import PolicyError

logger = logging.getLogger(__name__)

ROLES: Final = frozenset({"admin", "adapter"})
_SECTIONS: Final = frozenset({"version", "groups", "users", "rules", "adapters"})


class Mode(enum.IntEnum):
    """An entitlement level.

    ``REALTIME`` gives everything; ``DELAYED`` every message, late; ``CONFLATED`` the
    current state at each interval's end (the conflated line), never the ticks.
    """

    NONE = 0
    DELAYED = 1
    REALTIME = 2
    CONFLATED = 3


_MODES: Final = {"realtime": Mode.REALTIME, "delayed": Mode.DELAYED, "conflated": Mode.CONFLATED}


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """One grant: these users/groups may see these symbol patterns in this mode."""

    users: frozenset[str]
    groups: frozenset[str]
    symbols: tuple[str, ...]
    mode: Mode
    line: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AdapterBinding:
    """What one user may register on the adapter registry.

    Attributes:
        channels: channel names it may register adapters on.
        ids: adapter ids it may register, exactly as the registration carries them.
        numbers: adapter numbers: ``n`` allows the id ``<channel>.<n>`` on each bound channel.
        line: the binding's line in the policy file.
    """

    channels: frozenset[str]
    ids: frozenset[str] = frozenset()
    numbers: frozenset[int] = frozenset()
    line: int = 0

    def allows(self, channel_name: str, adapter_id: str) -> bool:
        """Whether this binding covers adapter ``adapter_id`` on channel ``channel_name``."""
        if channel_name not in self.channels:
            return False
        return adapter_id in self.ids or any(adapter_id == f"{channel_name}.{n}" for n in self.numbers)


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """Who is calling: a user name plus the groups and roles the key store gives it."""

    user: str
    groups: frozenset[str] = frozenset()
    roles: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """A parsed, validated authorization policy."""

    groups: Mapping[str, frozenset[str]] = field(default_factory=dict)  # group -> roles
    users: Mapping[str, tuple[frozenset[str], frozenset[str]]] = field(default_factory=dict)
    rules: tuple[Rule, ...] = ()
    adapters: Mapping[str, AdapterBinding] = field(default_factory=dict)  # user -> binding

    def groups_of(self, principal: Principal) -> frozenset[str]:
        """The principal's groups: from the key store plus from the policy's ``users`` section."""
        policy_groups = self.users.get(principal.user, (frozenset(), frozenset()))[0]
        return principal.groups | policy_groups

    def has_role(self, principal: Principal, role: str) -> bool:
        """Whether the principal holds ``role`` (directly, through the policy, or through a group).

        Args:
            principal: the caller.
            role: ``"admin"`` or ``"adapter"``.

        Returns:
            True when granted.
        """
        if role in principal.roles or role in self.users.get(principal.user, ((), frozenset()))[1]:
            return True
        return any(role in self.groups.get(group, frozenset()) for group in self.groups_of(principal))

    def entitlement(self, principal: Principal, requested: str) -> Mode:
        """The mode the principal's grants give a symbol or pattern.

        A requested pattern is admitted only when every symbol it can match is
        granted (:func:`globs.is_covered`): ``REALTIME`` when the real-time grants
        cover it, else ``DELAYED`` when the delayed and real-time grants together
        do, else ``CONFLATED`` when the conflated and real-time grants together do.
        ``"AB*"`` is covered by ``"A*"``; ``"A*"`` is not covered by ``"A?"``.

        Args:
            principal: the caller.
            requested: a symbol (``"AAPL"``) or an fnmatch pattern (``"A*"``).

        Returns:
            ``Mode.REALTIME``, ``Mode.DELAYED``, ``Mode.CONFLATED`` or ``Mode.NONE``.

        Raises:
            PatternError: a pattern too long or too complex to check (refused).
        """
        granted = self.granted(principal)
        if globs.is_covered(requested, granted[Mode.REALTIME]):
            return Mode.REALTIME
        if globs.is_covered(requested, granted[Mode.REALTIME] + granted[Mode.DELAYED]):
            return Mode.DELAYED
        if globs.is_covered(requested, granted[Mode.REALTIME] + granted[Mode.CONFLATED]):
            return Mode.CONFLATED
        return Mode.NONE

    def granted(self, principal: Principal) -> dict[Mode, list[str]]:
        """The patterns the principal's rules grant, by mode (``REALTIME``, ``DELAYED``, ``CONFLATED``)."""
        groups = self.groups_of(principal)
        granted: dict[Mode, list[str]] = {Mode.REALTIME: [], Mode.DELAYED: [], Mode.CONFLATED: []}
        for rule in self.rules:
            if principal.user in rule.users or groups & rule.groups:
                granted[rule.mode].extend(rule.symbols)
        return granted

    def reach(self, principal: Principal, *, delayed: bool, conflated: bool = False) -> tuple[str, ...]:
        """What the principal may read in a mode: real-time grants; delayed or conflated, with them."""
        granted = self.granted(principal)
        if delayed:
            return (*granted[Mode.REALTIME], *granted[Mode.DELAYED])
        if conflated:
            return (*granted[Mode.REALTIME], *granted[Mode.CONFLATED])
        return tuple(granted[Mode.REALTIME])

    def may_register(self, principal: Principal, *, channel_name: str, adapter_id: str) -> bool:
        """Whether the principal may register adapter ``adapter_id`` on ``channel_name``.

        Only the ``adapters`` section decides: a user with no binding may
        register nothing, whatever its roles.

        Args:
            principal: the caller.
            channel_name: the channel the registration names.
            adapter_id: the adapter id the registration names.

        Returns:
            True when the caller's binding covers both.
        """
        binding = self.adapters.get(principal.user)
        return binding is not None and binding.allows(channel_name, adapter_id)


def _fail(reason: str, node: yaml.Node | None, source: str) -> PolicyError:
    line = node.start_mark.line + 1 if node is not None else None
    return PolicyError(reason, line=line, source=source)


def _mapping(node: yaml.Node, what: str, source: str) -> list[tuple[str, yaml.Node, yaml.Node]]:
    if isinstance(node, yaml.ScalarNode) and node.value in ("", "~", "null"):
        return []
    if not isinstance(node, yaml.MappingNode):
        raise _fail(f"{what} must be a mapping", node, source)
    items: list[tuple[str, yaml.Node, yaml.Node]] = []
    for key, value in node.value:
        if not isinstance(key, yaml.ScalarNode) or not key.value:
            raise _fail(f"{what}: keys must be non-empty strings", key, source)
        items.append((key.value, key, value))
    return items


def _string_list(node: yaml.Node, what: str, source: str) -> list[str]:
    if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":str"):
        return [node.value]
    if not isinstance(node, yaml.SequenceNode):
        raise _fail(f"{what} must be a list of strings", node, source)
    out = []
    for item in node.value:
        if not isinstance(item, yaml.ScalarNode) or not item.value.strip():
            raise _fail(f"{what} must hold non-empty strings", item, source)
        out.append(item.value.strip())
    return out


def _roles(node: yaml.Node, what: str, source: str) -> frozenset[str]:
    roles = _string_list(node, what, source)
    unknown = sorted(set(roles) - ROLES)
    if unknown:
        raise _fail(f"{what}: unknown role {unknown[0]!r} (known: {', '.join(sorted(ROLES))})", node, source)
    return frozenset(roles)


def _check_keys(
    items: Iterable[tuple[str, yaml.Node, yaml.Node]], allowed: set[str], what: str, source: str
) -> None:
    for name, key, _value in items:
        if name not in allowed:
            raise _fail(f"{what}: unknown key {name!r} (allowed: {', '.join(sorted(allowed))})", key, source)


def _parse_groups(node: yaml.Node, source: str) -> dict[str, frozenset[str]]:
    groups: dict[str, frozenset[str]] = {}
    for name, _key, value in _mapping(node, "groups", source):
        items = _mapping(value, f"group {name!r}", source)
        _check_keys(items, {"roles", "description"}, f"group {name!r}", source)
        roles = {k: v for k, _kn, v in items}
        groups[name] = (
            _roles(roles["roles"], f"group {name!r} roles", source) if "roles" in roles else frozenset()
        )
    return groups


def _parse_users(
    node: yaml.Node, groups: Mapping[str, frozenset[str]], source: str
) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    users: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
    for name, _key, value in _mapping(node, "users", source):
        items = _mapping(value, f"user {name!r}", source)
        _check_keys(items, {"groups", "roles", "description"}, f"user {name!r}", source)
        fields = {k: v for k, _kn, v in items}
        user_groups = (
            _string_list(fields["groups"], f"user {name!r} groups", source) if "groups" in fields else []
        )
        for group in user_groups:
            if group not in groups:
                raise _fail(f"user {name!r}: undefined group {group!r}", fields["groups"], source)
        roles = _roles(fields["roles"], f"user {name!r} roles", source) if "roles" in fields else frozenset()
        users[name] = (frozenset(user_groups), roles)
    return users


def _parse_rule(node: yaml.Node, groups: Mapping[str, frozenset[str]], source: str) -> Rule:
    items = _mapping(node, "rule", source)
    _check_keys(items, {"users", "groups", "symbols", "mode", "description"}, "rule", source)
    fields = {k: v for k, _kn, v in items}
    rule_users = _string_list(fields["users"], "rule users", source) if "users" in fields else []
    rule_groups = _string_list(fields["groups"], "rule groups", source) if "groups" in fields else []
    if not rule_users and not rule_groups:
        raise _fail("rule names no users and no groups", node, source)
    for group in rule_groups:
        if group not in groups:
            raise _fail(f"rule: undefined group {group!r}", fields["groups"], source)
    if "symbols" not in fields:
        raise _fail("rule has no symbols", node, source)
    symbols = _string_list(fields["symbols"], "rule symbols", source)
    if not symbols:
        raise _fail("rule symbols is empty", fields["symbols"], source)
    mode_node = fields.get("mode")
    mode_text = mode_node.value if isinstance(mode_node, yaml.ScalarNode) else None
    if mode_node is None:
        raise _fail("rule has no mode (realtime, delayed or conflated)", node, source)
    if mode_text not in _MODES:
        raise _fail(
            f"rule mode must be 'realtime', 'delayed' or 'conflated', not {mode_text!r}", mode_node, source
        )
    return Rule(
        users=frozenset(rule_users),
        groups=frozenset(rule_groups),
        symbols=tuple(symbols),
        mode=_MODES[mode_text],
        line=node.start_mark.line + 1,
    )


def _adapter_ids(node: yaml.Node, what: str, source: str) -> tuple[frozenset[str], frozenset[int]]:
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        raise _fail(f"{what} must be a non-empty list of adapter ids or numbers", node, source)
    ids: set[str] = set()
    numbers: set[int] = set()
    for item in node.value:
        if isinstance(item, yaml.ScalarNode) and item.tag.endswith(":int") and item.value.isdigit():
            if int(item.value) < 1:
                raise _fail(f"{what}: adapter numbers start at 1", item, source)
            numbers.add(int(item.value))
        elif isinstance(item, yaml.ScalarNode) and item.tag.endswith(":str") and item.value.strip():
            ids.add(item.value.strip())
        else:
            raise _fail(f"{what} must hold adapter ids (strings) or adapter numbers (>= 1)", item, source)
    return frozenset(ids), frozenset(numbers)


def _parse_adapters(node: yaml.Node, source: str) -> dict[str, AdapterBinding]:
    bindings: dict[str, AdapterBinding] = {}
    for name, key, value in _mapping(node, "adapters", source):
        what = f"adapters {name!r}"
        items = _mapping(value, what, source)
        _check_keys(items, {"channels", "ids", "description"}, what, source)
        fields = {k: v for k, _kn, v in items}
        if "channels" not in fields or "ids" not in fields:
            raise _fail(f"{what} needs channels and ids", value, source)
        channels = _string_list(fields["channels"], f"{what} channels", source)
        if not channels:
            raise _fail(f"{what} channels is empty", fields["channels"], source)
        ids, numbers = _adapter_ids(fields["ids"], f"{what} ids", source)
        bindings[name] = AdapterBinding(
            channels=frozenset(channels), ids=ids, numbers=numbers, line=key.start_mark.line + 1
        )
    return bindings


def parse_policy(text: str, *, source: str = "<string>") -> Policy:
    """Parse and validate a policy document.

    Args:
        text: the YAML text.
        source: the file name used in error messages.

    Returns:
        The validated policy.

    Raises:
        PolicyError: on YAML syntax errors or invalid content, naming the line.
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise PolicyError(
            f"YAML syntax error: {exc.problem or exc.context}", line=line, source=source
        ) from exc
    except yaml.YAMLError as exc:
        raise PolicyError(f"YAML error: {exc}", source=source) from exc
    if root is None:
        raise PolicyError("the policy is empty", line=1, source=source)
    sections = _mapping(root, "policy", source)
    _check_keys(sections, set(_SECTIONS), "policy", source)
    by_name = {name: value for name, _key, value in sections}
    if "version" in by_name:
        version = by_name["version"]
        if not isinstance(version, yaml.ScalarNode) or version.value != "1":
            raise _fail("unsupported policy version (expected 1)", version, source)
    groups = _parse_groups(by_name["groups"], source) if "groups" in by_name else {}
    users = _parse_users(by_name["users"], groups, source) if "users" in by_name else {}
    rules_node = by_name.get("rules")
    rules: list[Rule] = []
    if rules_node is not None:
        if not isinstance(rules_node, yaml.SequenceNode):
            raise _fail("rules must be a list", rules_node, source)
        rules = [_parse_rule(item, groups, source) for item in rules_node.value]
    adapters = _parse_adapters(by_name["adapters"], source) if "adapters" in by_name else {}
    return Policy(groups=groups, users=users, rules=tuple(rules), adapters=adapters)


class PolicyFile:
    """The policy file on disk and the last good policy parsed from it.

    Call :meth:`poll` periodically; it re-reads the file only when its
    mtime (or size) changed, so reloading is cheap.

    Args:
        path: the policy file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self.policy: Policy = Policy()
        self.last_error: PolicyError | None = None
        self.generation = 0  # good loads
        self.rejections = 0  # bad files seen

    def __repr__(self) -> str:
        return (
            f"<PolicyFile {str(self.path)!r} [generation={self.generation}, rules={len(self.policy.rules)}]>"
        )

    def load(self) -> Policy:
        """Load the file now; raise on error (used at start-up, where a bad policy is fatal).

        Returns:
            The loaded policy.

        Raises:
            PolicyError: the file is missing or invalid.
        """
        try:
            stat = self.path.stat()
            text = self.path.read_text(encoding="utf-8")
        except OSError as exc:
            raise PolicyError(f"cannot read policy: {exc.strerror}", source=str(self.path)) from exc
        self.policy = parse_policy(text, source=str(self.path))
        self._stamp = (stat.st_mtime_ns, stat.st_size)
        self.generation += 1
        return self.policy

    def poll(self) -> bool:
        """Reload if the file changed; keep the last good policy on error.

        Returns:
            True when a new policy was loaded.
        """
        try:
            stat = self.path.stat()
        except OSError as exc:
            logger.warning("policy %s unreadable, keeping the last good policy: %s", self.path, exc)
            return False
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp == self._stamp:
            return False
        try:
            self.load()
        except PolicyError as exc:
            self._stamp = stamp  # report a bad file once, not at every poll
            self.last_error = exc
            self.rejections += 1
            logger.error("policy rejected, keeping the last good policy: %s", exc)
            return False
        logger.info("policy reloaded from %s (%d rules)", self.path, len(self.policy.rules))
        return True
