from __future__ import annotations

from pathlib import Path

import pytest

from feedha.admin_server.errors import PolicyError
from feedha.admin_server.policy import Mode, PolicyFile, Principal, parse_policy

GOOD = """\
version: 1
groups:
  operators: {roles: [admin]}
  traders: {}
  public: {}
users:
  alice: {groups: [traders]}
  carol: {roles: [adapter]}
rules:
  - groups: [traders]
    symbols: ["A*", "MSFT"]
    mode: realtime
  - groups: [public, traders]
    symbols: ["*"]
    mode: delayed
  - users: [bob]
    symbols: [N*]
    mode: realtime
"""


def test_parse_and_entitlements() -> None:
    policy = parse_policy(GOOD)
    alice = Principal(user="alice")
    assert policy.entitlement(alice, "AAPL") is Mode.REALTIME
    assert policy.entitlement(alice, "MSFT") is Mode.REALTIME
    assert policy.entitlement(alice, "ZZZ") is Mode.DELAYED  # public delayed grant via traders
    bob = Principal(user="bob")
    assert policy.entitlement(bob, "NVDA") is Mode.REALTIME
    assert policy.entitlement(bob, "AAPL") is Mode.NONE
    # groups from the key store count too
    dave = Principal(user="dave", groups=frozenset({"public"}))
    assert policy.entitlement(dave, "AAPL") is Mode.DELAYED


def test_patterns_are_covered_only_by_wider_grants() -> None:
    policy = parse_policy(GOOD)
    bob = Principal(user="bob")
    assert policy.entitlement(bob, "N*") is Mode.REALTIME
    assert policy.entitlement(bob, "NV*") is Mode.REALTIME
    assert policy.entitlement(bob, "*") is Mode.NONE
    assert policy.entitlement(bob, "[NA]*") is Mode.NONE


def test_roles() -> None:
    policy = parse_policy(GOOD)
    assert not policy.has_role(Principal(user="alice"), "admin")
    assert policy.has_role(Principal(user="x", groups=frozenset({"operators"})), "admin")
    assert policy.has_role(Principal(user="x", roles=frozenset({"admin"})), "admin")
    assert policy.has_role(Principal(user="carol"), "adapter")


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("rules:\n  - groups: [nope]\n    symbols: [A]\n    mode: realtime\n", 2, "undefined group 'nope'"),
        ("groups: {g: {}}\nrules:\n  - groups: [g]\n    symbols: [A]\n    mode: fast\n", 5, "mode must be"),
        ("groups: {g: {}}\nrules:\n  - groups: [g]\n    mode: realtime\n", 3, "no symbols"),
        ("rules:\n  - symbols: [A]\n    mode: delayed\n", 2, "no users and no groups"),
        ("groups:\n  g: {roles: [root]}\n", 2, "unknown role 'root'"),
        ("rule: {}\n", 1, "unknown key 'rule'"),
        ("rules: [\n  {users: [a], symbols: [A], mode: realtime\n", 3, "YAML syntax error"),
        ("users:\n  a:\n    groups: [missing]\n", 3, "undefined group 'missing'"),
        ("", 1, "empty"),
        ("version: 2\n", 1, "unsupported policy version"),
    ],
)
def test_bad_policies_name_line_and_reason(text: str, line: int, reason: str) -> None:
    with pytest.raises(PolicyError) as info:
        parse_policy(text, source="p.yaml")
    assert info.value.line == line, str(info.value)
    assert reason in info.value.problem
    assert str(info.value).startswith(f"p.yaml:{line}: ")


def test_deploy_example_is_valid() -> None:
    policy = parse_policy(Path("deploy/policy.yaml").read_text())
    assert policy.has_role(Principal(user="ops"), "admin")
    assert policy.entitlement(Principal(user="alice"), "AAPL") is Mode.REALTIME


def test_policy_file_keeps_last_good(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(GOOD)
    watched = PolicyFile(path)
    watched.load()
    assert not watched.poll()  # unchanged
    path.write_text(GOOD + "  - users: [x]\n    mode: sometimes\n    symbols: [A]\n")
    assert not watched.poll()
    assert watched.last_error is not None and watched.last_error.line == 20
    assert watched.policy.entitlement(Principal(user="alice"), "AAPL") is Mode.REALTIME
    path.write_text(GOOD.replace('"A*", ', ""))
    assert watched.poll()
    assert watched.policy.entitlement(Principal(user="alice"), "AAPL") is Mode.DELAYED
    assert "generation=2" in repr(watched)


BOUND = """\
groups:
  adapters: {roles: [adapter]}
users:
  feed-a: {groups: [adapters]}
  feed-n: {groups: [adapters]}
adapters:
  feed-a: {channels: [EQ-A-M], ids: [1, 2, 3]}
  feed-n:
    channels: [EQ-N-Z, EQ-X]
    ids: [eq-n-z-primary, 2]
"""


def test_adapter_bindings_name_channels_and_ids() -> None:
    policy = parse_policy(BOUND)
    feed_a, feed_n = Principal(user="feed-a"), Principal(user="feed-n")
    assert policy.may_register(feed_a, channel_name="EQ-A-M", adapter_id="EQ-A-M.2")
    assert not policy.may_register(feed_a, channel_name="EQ-A-M", adapter_id="EQ-A-M.4")  # unbound number
    assert not policy.may_register(feed_a, channel_name="EQ-N-Z", adapter_id="EQ-N-Z.1")  # other channel
    assert not policy.may_register(feed_a, channel_name="EQ-A-M", adapter_id="EQ-N-Z.1")  # other's id
    assert not policy.may_register(feed_a, channel_name="EQ-A-M", adapter_id="EQ-A-M.02")
    assert policy.may_register(feed_n, channel_name="EQ-N-Z", adapter_id="eq-n-z-primary")
    assert policy.may_register(feed_n, channel_name="EQ-X", adapter_id="EQ-X.2")
    assert not policy.may_register(feed_n, channel_name="EQ-A-M", adapter_id="eq-n-z-primary")
    assert policy.adapters["feed-n"].line == 8


def test_adapter_role_without_binding_registers_nothing() -> None:
    policy = parse_policy(BOUND + "  ops: {channels: [EQ-A-M], ids: [1]}\n")
    carol = Principal(user="carol", roles=frozenset({"adapter", "admin"}))
    assert policy.has_role(carol, "adapter")
    assert not policy.may_register(carol, channel_name="EQ-A-M", adapter_id="EQ-A-M.1")
    assert not parse_policy(GOOD).may_register(carol, channel_name="EQ-A-M", adapter_id="EQ-A-M.1")


@pytest.mark.parametrize(
    ("section", "line", "reason"),
    [
        ("adapters:\n  f: {channels: [EQ-A-M]}\n", 2, "needs channels and ids"),
        ("adapters:\n  f: {channels: [], ids: [1]}\n", 2, "channels is empty"),
        ("adapters:\n  f: {channels: [EQ-A-M], ids: []}\n", 2, "non-empty list"),
        ("adapters:\n  f:\n    channels: [EQ-A-M]\n    ids: [1, 0]\n", 4, "numbers start at 1"),
        ("adapters:\n  f:\n    channels: [EQ-A-M]\n    ids: [1, true]\n", 4, "adapter ids (strings)"),
        ("adapters:\n  f:\n    channels: [EQ-A-M]\n    ids: [1]\n    endpoints: [x]\n", 5, "unknown key"),
        ("adapters: [f]\n", 1, "must be a mapping"),
    ],
)
def test_bad_adapter_bindings_name_their_line(section: str, line: int, reason: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy("version: 1\n" + section, source="p.yaml")
    assert reason in str(caught.value)
    assert caught.value.line == line + 1
