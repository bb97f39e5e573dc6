"""The plain source asks the formats for their captures without loading an adapter.

``feedha source`` plays a format's captures through its capture face
(``adapter/formats/capture_registry.py``); scripts/check_layers.py lets the plain
source import that registry and nothing else of the adapter's formats. This holds
what the registry pulls in turn: no engine, no core, no protobuf, and none of the
drills' poison (each format loads its own only when a drill asks).
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "feedha.adapter.core",
    "feedha.adapter.conversion",
    "feedha.adapter.runner",
    "feedha.adapter.journal",
    "feedha.adapter.formats.registry",
    "feedha.adapter.formats.interface",
    "google.protobuf",
)


def _imported(statement: str) -> list[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return list(json.loads(result.stdout))


def test_the_source_command_imports_no_engine_core_or_poison() -> None:
    modules = _imported("import feedha.plain_source.cli")
    assert "feedha.adapter.formats.capture_registry" in modules  # the check below looks at something
    heavy = [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert heavy == []
    assert not [m for m in modules if m.endswith(".poison")]


def test_a_drill_that_asks_for_a_format_s_poison_loads_it() -> None:
    modules = _imported(
        "from feedha.adapter.formats.capture_registry import CAPTURES\n"
        "kinds = {name: face.chaos().kinds for name, face in CAPTURES.items() if face.chaos}\n"
        "assert all(kinds.values()) and len(kinds) == 2"
    )
    assert sum(m.endswith(".poison") for m in modules) == 2
