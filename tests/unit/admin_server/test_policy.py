from __future__ import annotations

from pathlib import Path

import pytest

from admin_server.errors import PolicyError
from admin_server.policy import Mode, PolicyFile, Principal, parse_policy

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
    assert reason in info.value.reason
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
