"""Glob containment: may a requested pattern be admitted under some granted patterns?

Theory of operation
-------------------
Symbols and patterns are fnmatch globs -- ``*``, ``?``, ``[...]``, ``[!...]``,
no escapes -- matched case-sensitively as :func:`fnmatch.fnmatchcase` does. A
requested pattern is admitted only when every symbol it can match is granted:
L(request) ⊆ L(grant 1) ∪ ... ∪ L(grant n). Reading the request literally and
matching it against each grant (what the policy did before) is not that: a
grant of ``A?`` matches the text ``A*``.

A pattern is a list of tokens: a literal character, ``?``, ``*`` (runs of ``*``
are one) or a character class. A class is kept as the one-character regular
expression fnmatch itself builds from its text, so class membership is exactly
fnmatch's (ranges, ``[!]``, ``[]]``, reversed ranges and all); a ``[`` with no
closing ``]`` is a literal, as in fnmatch.

The alphabet is unbounded, but a token's verdict on a character can change
only at a character the patterns mention: cutting the code points at c and
c + 1 for every mentioned c leaves intervals on which every token agrees, so
one representative per interval stands for all its characters. The check then
walks, breadth first over those representatives, the product of the request's
NFA (a set of positions) and the grants' NFAs (a set of (grant, position)),
and fails at the first state where the request accepts and no grant does --
the path to it is a symbol the request matches and no grant allows. Branches
where the request is dead, or where some grant is at a final ``*`` (it accepts
any rest), are pruned. The state space is finite, so the walk ends; its work
(NFA position moves) is capped at :data:`MAX_STEPS`, because the walk runs on
the server's event loop, and a request that reaches the cap is refused with
:class:`~admin_server.errors.PatternError`: refusing never admits anything, so
the check stays sound.

A request may carry many patterns, each checked up to three times (once per
mode), so one request's checks together share a budget as well
(:func:`step_budget`, :data:`MAX_REQUEST_STEPS`, opened by the hub around each
plan): a request that spends it is refused (``PATTERNS_TOO_COMPLEX``, not
cached: it says nothing about any one pattern), and the steps it spent are
reported so that the hub can charge them to the user's request rate. An
answer taken from the cache costs nothing. Pure (the budget is a context
variable of the caller's).
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import fnmatch
import functools
import re
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from feedha.admin_server.errors import FieldViolation, PatternError

__all__ = [
    "MAX_PATTERN_LENGTH",
    "MAX_REQUEST_STEPS",
    "MAX_STEPS",
    "StepBudget",
    "has_wildcards",
    "is_covered",
    "matches",
    "step_budget",
    "uncovered_example",
]

MAX_PATTERN_LENGTH: Final = 64  # requested patterns only (grants come from the operator's policy)
MAX_STEPS: Final = 60_000  # NFA position moves before a request is refused as too complex (~0.1 s)
MAX_REQUEST_STEPS: Final = MAX_STEPS  # the moves of one request's checks together (every pattern, every mode)
_CACHE_SIZE: Final = 4096
_MAX_CODE_POINT: Final = 0x10FFFF


@dataclass(slots=True)
class StepBudget:
    """What one request's pattern checks may spend (``limit``) and did spend (``spent``), in NFA moves."""

    limit: int = MAX_REQUEST_STEPS
    spent: int = 0


_budget: contextvars.ContextVar[StepBudget | None] = contextvars.ContextVar(
    "feedha_glob_budget", default=None
)


@contextlib.contextmanager
def step_budget(limit: int = MAX_REQUEST_STEPS) -> Iterator[StepBudget]:
    """Checks made inside share one budget of ``limit`` moves (see the module notes).

    Inside another one, the outer budget is shared (and yielded).

    Yields:
        The budget: its ``spent`` says what the checks cost, cache hits free.
    """
    outer = _budget.get()
    if outer is not None:
        yield outer
        return
    budget = StepBudget(limit)
    token = _budget.set(budget)
    try:
        yield budget
    finally:
        _budget.reset(token)


class _RequestSpent(PatternError):
    """The request's budget ran out (about the request, not the pattern: never cached)."""

    reason = "PATTERNS_TOO_COMPLEX"


class _Kind(enum.Enum):
    LITERAL = "literal"
    ANY = "?"
    STAR = "*"
    CLASS = "[]"


@dataclass(frozen=True, slots=True)
class _Token:
    kind: _Kind
    text: str  # the character (LITERAL) or the class text with its brackets (CLASS)
    regex: re.Pattern[str] | None = None

    def matches(self, char: str) -> bool:
        if self.kind is _Kind.LITERAL:
            return char == self.text
        if self.kind is _Kind.CLASS:
            assert self.regex is not None
            return self.regex.match(char) is not None
        return True  # ANY (STAR is handled by the NFA, never asked)


_STAR: Final = _Token(_Kind.STAR, "*")
_ANY: Final = _Token(_Kind.ANY, "?")

Pattern = tuple[_Token, ...]


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _parse(pattern: str) -> Pattern:
    # The class scan mirrors fnmatch.translate, so a class ends where fnmatch's does.
    tokens: list[_Token] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        i += 1
        if char == "*":
            if not tokens or tokens[-1] is not _STAR:
                tokens.append(_STAR)
        elif char == "?":
            tokens.append(_ANY)
        elif char == "[":
            j = i
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                tokens.append(_Token(_Kind.LITERAL, "["))
                continue
            text = pattern[i - 1 : j + 1]
            tokens.append(_Token(_Kind.CLASS, text, re.compile(fnmatch.translate(text))))
            i = j + 1
        else:
            tokens.append(_Token(_Kind.LITERAL, char))
    return tuple(tokens)


def has_wildcards(pattern: str) -> bool:
    """Whether ``pattern`` matches anything but its own text (holds ``*``, ``?`` or a closed class)."""
    return any(token.kind is not _Kind.LITERAL for token in _parse(pattern))


def matches(symbol: str, pattern: str) -> bool:
    """Whether the NFA for ``pattern`` accepts ``symbol`` (the same answer as ``fnmatchcase``)."""
    tokens = _parse(pattern)
    positions = _closure(tokens, {0})
    for char in symbol:
        positions = _step(tokens, positions, char)
        if not positions:
            return False
    return len(tokens) in positions


def _closure(tokens: Pattern, positions: Iterable[int]) -> frozenset[int]:
    # A star may match nothing: being before it is also being after it.
    out = set(positions)
    for i in sorted(out):
        while i < len(tokens) and tokens[i] is _STAR:
            i += 1
            out.add(i)
    return frozenset(out)


def _step(tokens: Pattern, positions: frozenset[int], char: str) -> frozenset[int]:
    after: set[int] = set()
    for i in positions:
        if i == len(tokens):
            continue
        token = tokens[i]
        if token is _STAR:
            after.add(i)
        elif token.matches(char):
            after.add(i + 1)
    return _closure(tokens, after) if after else frozenset()


def _representatives(patterns: Iterable[Pattern]) -> list[str]:
    cuts = {0}
    for tokens in patterns:
        for token in tokens:
            if token.kind in (_Kind.LITERAL, _Kind.CLASS):
                for char in token.text:
                    cuts.update((ord(char), ord(char) + 1))
    return [chr(point) for point in sorted(cuts) if point <= _MAX_CODE_POINT]


def is_covered(requested: str, grants: Sequence[str]) -> bool:
    """Whether every symbol ``requested`` can match is matched by one of ``grants``.

    Args:
        requested: a symbol or fnmatch pattern asked for.
        grants: the granted fnmatch patterns.

    Returns:
        True when L(requested) ⊆ the union of L(grant); for a plain symbol that is
        ``any(fnmatchcase(requested, g) for g in grants)``.

    Raises:
        PatternError: a pattern request longer than :data:`MAX_PATTERN_LENGTH`, or too
            complex to decide within :data:`MAX_STEPS` (refused, never admitted).
    """
    answer = _decide(requested, tuple(dict.fromkeys(grants)))
    if isinstance(answer, PatternError):
        raise PatternError(str(answer))
    return answer


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _decide(requested: str, grants: tuple[str, ...]) -> bool | PatternError:
    # Refusals are cached too: the access reconciliation asks again every half second.
    try:
        return _is_covered(requested, grants)
    except _RequestSpent:
        raise
    except PatternError as exc:
        return exc


def uncovered_example(requested: str, grants: Sequence[str]) -> str | None:
    """A symbol ``requested`` matches and no grant does, or ``None`` when the grants cover it.

    The example is the shortest such symbol (breadth first), with each character one
    representative of the characters that behave alike (see the module notes).

    Raises:
        PatternError: as :func:`is_covered`.
    """
    answer = _example(requested, tuple(dict.fromkeys(grants)))
    if isinstance(answer, PatternError):
        raise PatternError(str(answer))
    return answer


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _example(requested: str, grants: tuple[str, ...]) -> str | None | PatternError:
    try:
        return _uncovered(requested, grants)
    except _RequestSpent:
        raise
    except PatternError as exc:
        return exc


def _is_covered(requested: str, grants: tuple[str, ...]) -> bool:
    return _uncovered(requested, grants) is None


def _uncovered(requested: str, grants: tuple[str, ...]) -> str | None:
    request = _parse(requested)
    if all(token.kind is _Kind.LITERAL for token in request):
        symbol = "".join(token.text for token in request)
        return None if any(fnmatch.fnmatchcase(symbol, grant) for grant in grants) else symbol
    if len(requested) > MAX_PATTERN_LENGTH:
        raise PatternError(
            f"pattern {requested!r} is longer than {MAX_PATTERN_LENGTH} characters; "
            "ask for shorter patterns or for symbols"
        )
    if "*" in grants:
        return None
    return _search(request, [_parse(grant) for grant in grants], requested)


def _search(request: Pattern, grants: list[Pattern], requested: str) -> str | None:
    budget = _budget.get()
    cap = MAX_STEPS if budget is None else min(MAX_STEPS, budget.limit - budget.spent)
    try:
        found, steps = _walk(request, grants, cap)
    except _Spent as spent:
        if budget is None:
            raise PatternError(_too_complex(requested)) from None
        budget.spent += spent.steps
        if cap == MAX_STEPS:  # this pattern's own cap: an answer about the pattern (cached)
            raise PatternError(_too_complex(requested)) from None
        message = (
            f"the patterns of this request take more than {budget.limit} steps to check against "
            f"your grants; ask for fewer or simpler patterns, or for symbols (limit {budget.limit})"
        )
        raise _RequestSpent(
            message,
            metadata={"limit": str(budget.limit)},
            violations=[FieldViolation("symbols", _RequestSpent.reason, message)],
        ) from None
    if budget is not None:
        budget.spent += steps
    return found


def _too_complex(requested: str) -> str:
    return (
        f"pattern {requested!r} is too complex to check against your grants; "
        "ask for simpler patterns or for symbols"
    )


class _Spent(Exception):
    def __init__(self, steps: int) -> None:
        super().__init__(steps)
        self.steps = steps


def _walk(request: Pattern, grants: list[Pattern], cap: int) -> tuple[str | None, int]:
    # The breadth-first walk (module notes): a symbol only the request matches, and the moves it took.
    alphabet = _representatives([request, *grants])
    start = (_closure(request, {0}), _grant_closure(grants, [(g, 0) for g in range(len(grants))]))
    seen = {start}
    parents: dict[_State, tuple[_State, str]] = {}  # how each state was first reached
    queue = deque([start])
    steps = 0
    while queue:
        state = queue.popleft()
        mine, theirs = state
        if len(request) in mine and not any(pos == len(grants[g]) for g, pos in theirs):
            return _path(parents, state), steps  # a symbol the request matches and no grant does
        steps += (len(mine) + len(theirs)) * len(alphabet)
        if steps > cap:
            raise _Spent(steps)
        for char in alphabet:
            after = (_step(request, mine, char), _grant_step(grants, theirs, char))
            if after[0] and not _is_universal(grants, after[1]) and after not in seen:
                seen.add(after)
                parents[after] = (state, char)
                queue.append(after)
    return None, steps


_State = tuple[frozenset[int], frozenset[tuple[int, int]]]


def _path(parents: dict[_State, tuple[_State, str]], state: _State) -> str:
    chars: list[str] = []
    while state in parents:
        state, char = parents[state]
        chars.append(char)
    return "".join(reversed(chars))


def _grant_closure(grants: list[Pattern], positions: Iterable[tuple[int, int]]) -> frozenset[tuple[int, int]]:
    out: set[tuple[int, int]] = set()
    for g, pos in positions:
        out.update((g, p) for p in _closure(grants[g], {pos}))
    return frozenset(out)


def _grant_step(
    grants: list[Pattern], positions: frozenset[tuple[int, int]], char: str
) -> frozenset[tuple[int, int]]:
    after: set[tuple[int, int]] = set()
    for g, pos in positions:
        tokens = grants[g]
        if pos == len(tokens):
            continue
        token = tokens[pos]
        if token is _STAR:
            after.update((g, p) for p in _closure(tokens, {pos}))
        elif token.matches(char):
            after.update((g, p) for p in _closure(tokens, {pos + 1}))
    return frozenset(after)


def _is_universal(grants: list[Pattern], positions: frozenset[tuple[int, int]]) -> bool:
    # A grant at its final star accepts every continuation: nothing below can fail.
    return any(pos == len(grants[g]) - 1 and grants[g][pos] is _STAR for g, pos in positions)
