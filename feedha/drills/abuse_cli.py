"""``feedha drill abuse``'s command line: its options, and the drill's options from them."""

from __future__ import annotations

import argparse

from feedha.drills.abuse import AbuseOptions
from feedha.drills.output import output_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``feedha drill abuse``."""
    defaults = AbuseOptions()
    parser.add_argument(
        "--rate", type=float, default=defaults.rate, help="source msg/s (default: %(default)g)"
    )
    parser.add_argument(
        "--attack-seconds", type=float, default=defaults.attack_seconds, help="how long the attacks last"
    )
    parser.add_argument("--subscriptions", type=int, default=defaults.subscriptions)
    parser.add_argument("--churn", type=int, default=defaults.churn, help="Subscribe/Cancel cycles")
    parser.add_argument("--logins", type=int, default=defaults.logins, help="concurrent wrong logins")
    parser.add_argument("--idle", type=int, default=defaults.idle, help="idle connections per health port")
    parser.add_argument("--replay", type=int, default=defaults.replay, help="replay connections of one key")
    parser.add_argument(
        "--replay-keys",
        type=int,
        default=defaults.replay_keys,
        help="CURVE keys of one user flooding every replay service while another user asks for gaps "
        "(default: %(default)s, the quota of keys per user; 0: none)",
    )
    parser.add_argument(
        "--cancelled-logins",
        type=int,
        default=defaults.cancelled_logins,
        help="logins cancelled mid-hash in one burst, before the other attacks (0: none)",
    )
    parser.add_argument(
        "--seal-churn-every",
        type=float,
        default=defaults.seal_churn_every,
        help="seconds between Subscribe/Cancel cycles on the sealed channel, after the other attacks "
        "(0: not run; default: %(default)g)",
    )
    parser.add_argument(
        "--watch-streams",
        type=int,
        default=defaults.watch_streams,
        help="route watch streams of two users modifying their subscriptions in a loop (0: none)",
    )
    parser.add_argument(
        "--hashing",
        choices=("default", "fast"),
        default=defaults.hashing,
        help="the admin server's argon2id cost: fast (8 MiB, feedha up's; the default) or the production "
        "default (64 MiB and ~0.3 s of CPU a login: on a small machine already busy with the cluster, "
        "the honest login's own hash then takes most of a second)",
    )
    parser.add_argument(
        "--forged-terms",
        action=argparse.BooleanOptionalAction,
        default=defaults.forged_terms,
        help="a forger sending packets of high terms on every line an honest client-library "
        "subscriber reads (default: on)",
    )
    output_arguments(parser)


def options_from(args: argparse.Namespace) -> AbuseOptions:
    """The drill's options from parsed arguments.

    Raises:
        ValueError: a value out of range, named.
    """
    names = (
        *("subscriptions", "churn", "logins", "idle", "replay"),
        *("replay_keys", "cancelled_logins", "watch_streams"),
    )
    counts = {name: getattr(args, name) for name in names}
    bad = [f"--{name.replace('_', '-')}" for name, value in counts.items() if value < 0]
    if args.rate <= 0 or args.attack_seconds <= 0 or args.seal_churn_every < 0 or bad:
        raise ValueError(
            "need --rate > 0, --attack-seconds > 0, --seal-churn-every >= 0 and counts >= 0 "
            f"({', '.join(bad) or 'ok'})"
        )
    return AbuseOptions(
        rate=args.rate,
        attack_seconds=args.attack_seconds,
        hashing=args.hashing,
        seal_churn_every=args.seal_churn_every,
        forged_terms=args.forged_terms,
        **counts,
    )


__all__ = ["add_arguments", "options_from"]
