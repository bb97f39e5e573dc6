"""Brokering: which channels and lines a subscriber joins for the symbols it asks for.

Theory of operation: :func:`plan_routes` takes the caller, the requested
symbols or fnmatch patterns, the policy, the configured channels and the
registry's lines, and returns one :class:`Route` per channel (and per
delivery mode: a channel can carry some of a subscriber's symbols in real
time and others delayed). Every requested item must be entitled, or the
whole request fails with :class:`PermissionDeniedError` naming the items.
A symbol maps to the channels whose letter range holds its first letter; a
pattern that starts with a wildcard maps to every channel.

A line carries *every* symbol of its channel, and the data plane admits a
key per channel (CURVE, sealed multicast), not per symbol. So a route is
only given where the caller is entitled to the whole channel in that mode
(:func:`check_exposure`): its real-time grants cover every symbol the channel
can carry (:func:`channel_symbols`), or for a delayed route its real-time and
delayed grants together do. Items entitled in real time on a channel the
caller may read whole only delayed go on the delayed route (the route says
so). Anything else fails with ``PERMISSION_DENIED`` (``CHANNEL_NOT_ENTITLED``),
naming the channel, the symbols it would expose and one of them the caller
may not see. (Why refusing rather than filtering: docs/security.md.) A delayed route
(delayed-only symbols) carries the channel's *delayed* lines: the adapters'
delayed line endpoints with their replay services (which answer such a
subscriber delayed ranges only); it never names a real-time line. A
conflated route (conflated-only symbols, or items a caller may read whole only
conflated) likewise carries the channel's *conflated* lines and no replay
service. Every line of a real-time route also names its adapter's conflated
line (``LineView.conflated_line_endpoint``), which a real-time key may read
(``FeedClient(mode="conflated")``, ``on_slow="conflate"``). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from feedha.admin_server import globs
from feedha.admin_server.config import ChannelConfig
from feedha.admin_server.errors import (
    FieldViolation,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
)
from feedha.admin_server.policy import Mode, Policy, Principal
from feedha.admin_server.registry import AdapterRecord
from feedha.proto.registry import AdapterRole
from feedha.proto.seal import SealKey

MAX_ITEMS: Final = 1000
MAX_ITEM_LENGTH: Final = 64
MAX_PATTERNS: Final = 16  # items with wildcards in one request: each costs up to three glob checks
_WILDCARDS: Final = frozenset("*?[")
_MODE_NAMES: Final = {Mode.REALTIME: "real-time", Mode.DELAYED: "delayed", Mode.CONFLATED: "conflated"}


@dataclass(frozen=True, slots=True, kw_only=True)
class LineView:
    """One adapter's line, as handed to subscribers."""

    adapter_id: str
    line_endpoint: str
    replay_endpoint: str
    role: AdapterRole
    term: int
    is_up: bool
    curve_server_key: str = ""  # Z85 CURVE key to connect with ("": a plain line)
    conflated_line_endpoint: str = ""  # the adapter's conflated line ("": it serves none)


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """What a subscriber needs to join one channel."""

    channel: ChannelConfig
    lines: tuple[LineView, ...]
    symbols: tuple[str, ...]
    delayed: bool  # then ``lines`` are the adapters' delayed lines
    seal_keys: tuple[SealKey, ...] = ()  # multicast lines: the keys their packets are sealed with
    conflated: bool = False  # then ``lines`` are the adapters' conflated lines

    @property
    def limit(self) -> int:
        """What a key this route reaches may read: 0 everything, 1 delayed only, 2 conflated only."""
        return 1 if self.delayed else 2 if self.conflated else 0

    @property
    def mode(self) -> Mode:
        """The route's mode: ``REALTIME``, ``DELAYED`` or ``CONFLATED``."""
        return Mode.DELAYED if self.delayed else Mode.CONFLATED if self.conflated else Mode.REALTIME


def validate_items(items: Sequence[str]) -> list[str]:
    """Check requested symbols/patterns and drop duplicates (keeping order).

    Raises:
        InvalidArgumentError: empty request, too many items or patterns (``TOO_MANY_PATTERNS``,
            the limit in the metadata), or an item that is empty, too long or holds whitespace
            (a ``ValueError``; the field named).
    """
    if not items:
        raise _invalid("symbols", "SYMBOLS_EMPTY", "symbols must not be empty")
    if len(items) > MAX_ITEMS:
        raise _invalid("symbols", "TOO_MANY_SYMBOLS", f"too many symbols: {len(items)} > {MAX_ITEMS}")
    seen: dict[str, None] = {}
    for index, item in enumerate(items):
        if not item or len(item) > MAX_ITEM_LENGTH or any(c.isspace() for c in item):
            raise _invalid(f"symbols[{index}]", "SYMBOL_INVALID", f"invalid symbol or pattern: {item[:64]!r}")
        seen.setdefault(item, None)
    patterns = sum(globs.has_wildcards(item) for item in seen)
    if patterns > MAX_PATTERNS:
        message = (
            f"too many patterns in one request: {patterns} > {MAX_PATTERNS}; ask for symbols, or for "
            f"fewer, wider patterns (limit {MAX_PATTERNS})"
        )
        raise InvalidArgumentError(
            message,
            reason="TOO_MANY_PATTERNS",
            metadata={"limit": str(MAX_PATTERNS)},
            violations=[FieldViolation("symbols", "TOO_MANY_PATTERNS", message)],
        )
    return list(seen)


def _invalid(field: str, reason: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(message, violations=[FieldViolation(field, reason, message)])


def _violations(items: Sequence[str], refused: Sequence[str], reason: str, what: str) -> list[FieldViolation]:
    """One violation per requested item that is refused, by its index in the request."""
    wanted = set(refused)
    return [
        FieldViolation(f"symbols[{index}]", reason, f"{what}: {item!r}")
        for index, item in enumerate(items)
        if item in wanted
    ]


def channels_for(item: str, channels: Iterable[ChannelConfig]) -> list[ChannelConfig]:
    """The channels that may carry a symbol or pattern (by its first character)."""
    if item[0] in _WILDCARDS:
        return list(channels)
    return [c for c in channels if c.covers(item)]


def line_views(
    records: Iterable[AdapterRecord], *, delayed: bool = False, conflated: bool = False
) -> tuple[LineView, ...]:
    """Registry records as subscriber-facing lines (order kept: active first).

    With ``delayed``: the adapters' delayed lines; with ``conflated``: their conflated
    lines, with no replay service (adapters that serve none are left out).
    """
    out = []
    for r in records:
        reg = r.registration
        endpoint = reg.delayed_line_endpoint if delayed else reg.line_endpoint
        if conflated:
            endpoint = reg.conflated_line_endpoint
        if not endpoint:
            continue
        out.append(
            LineView(
                adapter_id=r.adapter_id,
                line_endpoint=endpoint,
                replay_endpoint="" if conflated else reg.replay_endpoint,
                role=r.status.role,
                term=r.status.term,
                is_up=r.is_up,
                curve_server_key=reg.curve_public_key,
                conflated_line_endpoint=reg.conflated_line_endpoint,
            )
        )
    return tuple(out)


def plan_routes(
    principal: Principal,
    items: Sequence[str],
    *,
    policy: Policy,
    channels: Sequence[ChannelConfig],
    lines: dict[str, tuple[LineView, ...]],
    delayed_lines: dict[str, tuple[LineView, ...]] | None = None,
    conflated_lines: dict[str, tuple[LineView, ...]] | None = None,
) -> list[Route]:
    """Decide the routes for a subscription.

    Args:
        principal: the subscriber.
        items: requested symbols or fnmatch patterns.
        policy: the authorization policy.
        channels: the configured channels.
        lines: channel name -> its lines (from the registry).
        delayed_lines: channel name -> its delayed lines (from the registry).
        conflated_lines: channel name -> its conflated lines (from the registry).

    Returns:
        One route per (channel, mode) pair, in channel-number order.

    Raises:
        ValueError: invalid items.
        PermissionDeniedError: some items are not entitled (named in ``symbols``).
        NotFoundError: some items map to no configured channel.
    """
    grouped = _group_by_channel(principal, items, policy=policy, channels=channels)
    by_name = {c.name: c for c in channels}
    grouped = _settle_modes(principal, grouped, by_name, policy=policy)
    check_exposure(
        principal,
        {(by_name[name], mode): items for (name, mode), items in grouped.items()},
        policy=policy,
    )
    # A delayed or conflated route names those lines only: a real-time line must never reach it.
    by_mode = {Mode.REALTIME: lines, Mode.DELAYED: delayed_lines or {}, Mode.CONFLATED: conflated_lines or {}}
    routes = [
        Route(
            channel=by_name[name],
            lines=by_mode[mode].get(name, ()),
            symbols=tuple(symbols),
            delayed=mode is Mode.DELAYED,
            conflated=mode is Mode.CONFLATED,
        )
        for (name, mode), symbols in grouped.items()
    ]
    return sorted(routes, key=lambda r: (r.channel.number, r.mode))


def _group_by_channel(
    principal: Principal, items: Sequence[str], *, policy: Policy, channels: Sequence[ChannelConfig]
) -> dict[tuple[str, Mode], list[str]]:
    """The entitled items by (channel name, mode); refuses what is not entitled or not routed."""
    wanted = validate_items(items)
    modes = {item: policy.entitlement(principal, item) for item in wanted}
    denied = [item for item, mode in modes.items() if mode is Mode.NONE]
    if denied:
        raise PermissionDeniedError(
            f"not entitled to: {', '.join(denied)}",
            symbols=denied,
            violations=_violations(items, denied, "SYMBOL_NOT_ENTITLED", "not entitled"),
        )
    grouped: dict[tuple[str, Mode], list[str]] = {}
    unrouted = []
    for item in wanted:
        targets = channels_for(item, channels)
        if not targets:
            unrouted.append(item)
        for channel in targets:
            grouped.setdefault((channel.name, modes[item]), []).append(item)
    if unrouted:
        raise NotFoundError(
            f"no channel carries: {', '.join(unrouted)}",
            reason="SYMBOLS_NOT_ROUTED",
            metadata={"symbols": " ".join(unrouted)},
            violations=_violations(items, unrouted, "SYMBOL_NOT_ROUTED", "no channel carries"),
        )
    return grouped


def _settle_modes(
    principal: Principal,
    grouped: dict[tuple[str, Mode], list[str]],
    by_name: Mapping[str, ChannelConfig],
    *,
    policy: Policy,
) -> dict[tuple[str, Mode], list[str]]:
    """Real-time items on a channel the caller may not read whole in real time go delayed, if it may,
    else conflated, if it may."""
    settled: dict[tuple[str, Mode], list[str]] = {}
    for (name, mode), items in sorted(grouped.items(), key=lambda item: item[0][1] is Mode.REALTIME):
        if mode is Mode.REALTIME and not _covers(principal, by_name[name], policy, Mode.REALTIME):
            for fallback in (Mode.DELAYED, Mode.CONFLATED):  # the most the whole channel may be read
                if _covers(principal, by_name[name], policy, fallback):
                    mode = fallback
                    break
        settled.setdefault((name, mode), []).extend(items)
    order = {item: i for i, item in enumerate(item for items in grouped.values() for item in items)}
    return {route: sorted(items, key=lambda item: order[item]) for route, items in settled.items()}


def _reach(principal: Principal, policy: Policy, mode: Mode) -> tuple[str, ...]:
    return policy.reach(principal, delayed=mode is Mode.DELAYED, conflated=mode is Mode.CONFLATED)


def _covers(principal: Principal, channel: ChannelConfig, policy: Policy, mode: Mode) -> bool:
    return globs.uncovered_example(channel_symbols(channel), _reach(principal, policy, mode)) is None


def check_exposure(
    principal: Principal,
    routes: Mapping[tuple[ChannelConfig, Mode], Sequence[str]],
    *,
    policy: Policy,
) -> None:
    """Refuse routes that would show the caller symbols it is not entitled to.

    Args:
        principal: the caller.
        routes: (channel, mode) -> the requested items that lead there (named in the error).
        policy: the authorization policy.

    Raises:
        PermissionDeniedError: for some route, the caller's grants in its mode do not
            cover every symbol the channel carries (``CHANNEL_NOT_ENTITLED``; the metadata
            names the channels, the symbols each would expose and an example the caller
            may not see).
        PatternError: the grants are too complex to compare with a channel.
    """
    found = []
    for (channel, mode), items in routes.items():
        carried = channel_symbols(channel)
        example = globs.uncovered_example(carried, _reach(principal, policy, mode))
        if example is not None:
            found.append((channel.name, carried, example, _MODE_NAMES[mode], items))
    if not found:
        return
    parts = [
        f"channel {name} carries {carried} on one {mode} stream: {', '.join(items)} would expose symbols "
        f"you are not entitled to {mode} (e.g. {example!r})"
        for name, carried, example, mode, items in found
    ]
    message = "; ".join(parts) + "; a route needs a grant of the whole channel in its mode"
    raise PermissionDeniedError(
        message,
        reason="CHANNEL_NOT_ENTITLED",
        metadata={
            "channel": " ".join(name for name, *_rest in found),
            "exposes": " ".join(carried for _name, carried, *_rest in found),
            "example": " ".join(example for _name, _carried, example, *_rest in found),
            "mode": " ".join(mode for *_first, mode, _items in found),
        },
        violations=[FieldViolation("symbols", "CHANNEL_NOT_ENTITLED", part) for part in parts],
    )


def channel_symbols(channel: ChannelConfig) -> str:
    """The fnmatch pattern of the symbols the channel carries: ``[A-M]*`` for letters ``A-M``.

    A channel's line carries what its source stream carries; the configuration
    declares that to be the symbols whose first letter lies in the channel's
    range, in upper case (the feed's symbols; the sources split them so). That
    declaration is what a real-time or delayed route is checked against.
    """
    first, last = channel.first_letter, channel.last_letter
    return f"[{first}]*" if first == last else f"[{first}-{last}]*"
