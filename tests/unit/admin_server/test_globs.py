"""Glob containment against brute force over a tiny alphabet, and its wiring into the policy."""

from __future__ import annotations

import fnmatch
import itertools

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from feedha.admin_server import globs
from feedha.admin_server.errors import PatternError
from feedha.admin_server.policy import Mode, Principal, parse_policy

# The patterns mention only a, b and ]; c stands for every character they do not mention.
ALPHABET = "ab]c"
STRINGS = ["".join(p) for n in range(7) for p in itertools.product(ALPHABET, repeat=n)]
PIECES = ["a", "b", "?", "*", "[ab]", "[!a]", "[a-b]", "[b-a]", "[]a]", "[!]a]"]
# Parsing: every character that can change how fnmatch reads a pattern, and c.
SYNTAX_STRINGS = ["".join(p) for n in range(5) for p in itertools.product("ab[]!-c", repeat=n)]

patterns = st.lists(st.sampled_from(PIECES), min_size=0, max_size=5).map("".join)
grant_lists = st.lists(patterns, min_size=0, max_size=3)


def brute_force_covered(requested: str, grants: list[str]) -> bool:
    return all(
        any(fnmatch.fnmatchcase(s, g) for g in grants) for s in STRINGS if fnmatch.fnmatchcase(s, requested)
    )


@settings(max_examples=100, deadline=None)
@given(pattern=st.text(alphabet="ab[]!-*?", max_size=8))
def test_the_nfa_matches_exactly_what_fnmatch_matches(pattern: str) -> None:
    for symbol in SYNTAX_STRINGS:
        assert globs.matches(symbol, pattern) == fnmatch.fnmatchcase(symbol, pattern), (symbol, pattern)


@settings(max_examples=200, deadline=None)
@given(requested=patterns, grants=grant_lists)
@example(requested="a*", grants=["a?"])
@example(requested="a*", grants=["a", "a?*"])
@example(requested="[ab]*", grants=["a*", "b*"])
@example(requested="*", grants=["[!a]*", "a*"])
@example(requested="a*b", grants=["*b", "a*"])
def test_containment_agrees_with_brute_force(requested: str, grants: list[str]) -> None:
    covered = globs.is_covered(requested, grants)
    truth = brute_force_covered(requested, grants)
    # Sound: never admits a symbol (up to length 6 here) that no grant allows.
    if covered:
        assert truth, (requested, grants)
    # And exact for these small patterns: a refusal has a short counterexample.
    assert covered == truth, (requested, grants)


@pytest.mark.parametrize(
    ("requested", "grants", "covered"),
    [
        ("A*", ["A?"], False),
        ("A?", ["A*"], True),
        ("AB*", ["A*"], True),
        ("A*", ["A", "A?*"], True),  # a union: neither alone covers it
        ("[AB]*", ["A*", "B*"], True),
        ("[AB]*", ["A*"], False),
        ("?*", ["[!A]*", "A*"], True),
        ("*", ["[!A]*", "A*"], False),  # the empty symbol
        ("*", ["[A-Z]*"], False),  # the empty symbol and digits are not granted
        ("A[", ["A["], True),  # an unclosed bracket is a literal, as in fnmatch
        ("MSFT", ["M*"], True),
        ("msft", ["M*"], False),  # case-sensitive
        ("??", ["*"], True),
    ],
)
def test_examples(requested: str, grants: list[str], covered: bool) -> None:
    assert globs.is_covered(requested, grants) is covered


def test_overlong_and_too_complex_requests_are_refused() -> None:
    with pytest.raises(PatternError, match="longer than"):
        globs.is_covered("A*" * 40, ["*"])
    assert globs.is_covered("A" * 100, ["A*"])  # a plain symbol is just matched
    grants = [f"*{chr(0x41 + i)}*{chr(0x61 + i)}*{chr(0x30 + i % 10)}?" for i in range(26)]
    with pytest.raises(PatternError, match="too complex"):
        globs.is_covered("*" + "?*" * 20, grants)


POLICY = """\
groups:
  traders: {}
rules:
  - groups: [traders]
    symbols: ["A?", "B*"]
    mode: realtime
  - groups: [traders]
    symbols: ["A*"]
    mode: delayed
"""


def test_a_grant_of_a_question_mark_does_not_admit_a_star() -> None:
    policy = parse_policy(POLICY)
    alice = Principal(user="alice", groups=frozenset({"traders"}))
    assert policy.entitlement(alice, "AB") is Mode.REALTIME
    assert policy.entitlement(alice, "A?") is Mode.REALTIME
    assert policy.entitlement(alice, "A*") is Mode.DELAYED  # only the delayed grant covers every A...
    assert policy.entitlement(alice, "[AB]?") is Mode.REALTIME  # A? and B* together
    assert policy.entitlement(alice, "[AB]*") is Mode.DELAYED  # A* (delayed) and B* (real time)
    assert policy.entitlement(alice, "*") is Mode.NONE
    assert policy.entitlement(Principal(user="bob"), "A?") is Mode.NONE


def test_one_requests_checks_share_a_step_budget_that_refuses_without_caching_and_reports_its_cost() -> None:
    grants = [f"*{chr(0x41 + i)}*{chr(0x61 + i)}*{chr(0x30 + i % 10)}?" for i in range(26)]
    grants.append("zz-budget-test")  # grants of this test's own: no other test's cached answers
    # Patterns that each take ~7,000 moves: alone well within MAX_STEPS, nine together not.
    heavy = [f"{chr(0x41 + i)}*?" for i in range(12)]
    with globs.step_budget() as budget:
        with pytest.raises(PatternError, match="patterns of this request take more than") as spent:
            for pattern in heavy:
                globs.is_covered(pattern, grants)
    assert spent.value.reason == "PATTERNS_TOO_COMPLEX" and spent.value.metadata["limit"] == str(budget.limit)
    assert [v.field for v in spent.value.violations] == ["symbols"]
    assert budget.limit <= budget.spent <= budget.limit + globs.MAX_STEPS  # the moves it made, reported
    # Not cached as a refusal of that pattern: alone, with a fresh budget, it gets its own answer.
    cut_short = heavy[8]  # the ninth: the one the budget ran out on
    with globs.step_budget() as alone:
        globs.is_covered(cut_short, grants)
    assert 0 < alone.spent < alone.limit
    with globs.step_budget() as again, globs.step_budget() as inner:
        globs.is_covered(cut_short, grants)  # cached now: free
        assert inner is again
    assert again.spent == 0
