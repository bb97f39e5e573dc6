"""The layers scripts/check_layers.py enforces: what each package must not import, and why.

Read by :mod:`check_layers` (its module docstring says how the rules apply).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

# What a module that decides must not touch: sockets, clocks, threads, RPC.
_IO: Final = frozenset(
    {
        "zmq",
        "grpc",
        "asyncio",
        "time",
        "threading",
        "socket",
        "select",
        "psutil",
        "pyspark",
        "feedha.transport",
        "feedha.admin_client",
    }
)
_PURE: Final = "a pure core decides from its inputs and the time passed in; its shell does the I/O"
# Stands for the modules of the namespace's root folder (feedha/): the commands, and the drills'
# package (feedha/drills/, feedha.drills), which may import anything; nothing of the product
# (no package below) imports a command or a drill.
COMMANDS: Final = "feedha's commands"
# The root folder's modules every command's entry point shares (how settings, logs and extras
# are read): not commands, and leaves (they import no other feedha module but each other).
SHARED: Final = frozenset({"feedha.settings", "feedha.logs", "feedha.extras", "feedha.runtime"})
_ONLY_SHARED: Final = "a package reaches the root folder only for the commands' shared plumbing"

# The layers, lowest first. package (or module prefix) -> (names it must not
# import, why). A name forbids itself and everything under it (``zmq`` forbids
# ``zmq.asyncio``); every rule whose key prefixes a module applies to it.
# A package not listed may import anything that does not make a cycle.
LAYER_RULES: Final[Mapping[str, tuple[frozenset[str], str]]] = {
    "feedha.proto": (
        frozenset(
            {
                "zmq",
                "feedha.adapter",
                "feedha.admin_server",
                "feedha.admin_client",
                "feedha.client",
                "feedha.transport",
                "feedha.spark_feed",
                "feedha.plain_source",
                "feedha.bench",
                COMMANDS,
            }
        ),
        "proto is pure contracts and codecs: every other package depends on it, never the reverse",
    ),
    "feedha.transport": (
        frozenset(
            {"feedha.adapter", "feedha.admin_server", "feedha.admin_client", "feedha.client", COMMANDS}
        ),
        "transport is ZeroMQ set-up (and the daemons' HTTP endpoint) shared by adapters, sources, "
        "subscribers and the admin server",
    ),
    "feedha.admin_client": (
        frozenset({"feedha.adapter", "feedha.admin_server", "feedha.client", COMMANDS}),
        "admin_client is the admin API's client side, shared by the adapter, the client and feedctl",
    ),
    "feedha.adapter": (
        frozenset({"feedha.admin_server", COMMANDS}),
        "the adapter reaches the admin server through admin_client and proto.registry only",
    ),
    "feedha.client": (
        frozenset({"feedha.adapter", "feedha.admin_server", COMMANDS}),
        "what subscribers import must not pull in the adapter or the server",
    ),
    "feedha.admin_server": (frozenset({"feedha.adapter", "feedha.client", COMMANDS}), _ONLY_SHARED),
    "feedha.plain_source": (
        frozenset({"feedha.adapter", COMMANDS}),
        "the plain source stands in for a venue: it reaches the adapter's package only for "
        "LAYER_EXCEPTIONS' light modules, and the root folder only for the commands' shared plumbing",
    ),
    "feedha.spark_feed": (frozenset({COMMANDS}), _ONLY_SHARED),
    **{
        module: (
            frozenset(
                {
                    "feedha.proto",
                    "feedha.transport",
                    "feedha.adapter",
                    "feedha.admin_server",
                    "feedha.admin_client",
                    "feedha.client",
                    "feedha.spark_feed",
                    "feedha.plain_source",
                    "feedha.bench",
                    COMMANDS,
                }
            ),
            "the commands' shared plumbing is a leaf: every component's entry point imports it",
        )
        for module in sorted(SHARED)
    },
    # The pure cores (CONTRIBUTING.md, "Pure core, thin shell"): they decide, the shells
    # around them do the I/O.
    "feedha.adapter.core": (
        _IO
        | {
            "feedha.adapter.runner",
            "feedha.adapter.persistence",
            "feedha.adapter.admin_link",
            "feedha.adapter.journal",
        },
        _PURE,
    ),
    "feedha.adapter.conversion": (
        _IO | {"feedha.adapter.core", "feedha.adapter.runner", "feedha.adapter.journal"},
        _PURE,
    ),
    "feedha.adapter.formats": (
        _IO | {"feedha.adapter.core", "feedha.adapter.runner", "feedha.adapter.journal"},
        _PURE,
    ),
    "feedha.client.arbiter": (_IO, _PURE),
    # The arbiter's parts (client_lib/arbiter.py's module docstring).
    "feedha.client._delivery_stream": (_IO, _PURE),
    "feedha.client._holes": (_IO, _PURE),
    "feedha.client._copies": (_IO, _PURE),
    "feedha.client._live_blocks": (_IO, _PURE),
    "feedha.client._payload_fields": (_IO, _PURE),
    "feedha.client._blocks_ext": (_IO, _PURE),
    "feedha.client._claims": (_IO, _PURE),
    "feedha.plain_source.model": (_IO, _PURE),
    "feedha.plain_source.frames": (_IO, _PURE),
    "feedha.plain_source.pacing": (_IO, _PURE),
    "feedha.plain_source.capture": (_IO, _PURE),
}

# Modules a package may import though one of its rules forbids their package: rule key ->
# {module: why}. Each is exactly that module (what it imports in turn is held light by
# tests/unit/plain_source/test_light_imports.py).
LAYER_EXCEPTIONS: Final[Mapping[str, Mapping[str, str]]] = {
    "feedha.plain_source": {
        "feedha.adapter.curve_keys": "the CURVE key files the adapters read too (stdlib and zmq only)",
        "feedha.adapter.formats.capture_registry": "each format's captures, asked by name: no engine",
        "feedha.adapter.formats.capture_face": "what a format's captures are: the type the source plays",
    },
}
