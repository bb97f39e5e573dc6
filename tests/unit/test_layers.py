"""scripts/check_layers.py: the real tree follows the layers; a broken tree is refused, by name."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_layers.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_layers", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_layers"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


check_layers = _load()


def _run(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True, timeout=60, check=False
    )


NAMESPACE = """\
[tool.feedha.namespace]
"feedha" = "feedha"
"feedha.proto" = "proto"
"feedha.adapter" = "adapter"
"feedha.admin_server" = "admin_server"
"feedha.client" = "client_lib"
"feedha.bench" = "bench"
"""


def _tree(root: Path, files: dict[str, str]) -> Path:
    (root / "pyproject.toml").write_text(NAMESPACE)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_the_real_tree_follows_the_layers() -> None:
    result = _run(ROOT)
    assert result.returncode == 0, result.stderr


def test_a_violation_and_a_cycle_are_named(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "proto/__init__.py": "",
            "proto/codec.py": "import zmq.asyncio\n",
            "adapter/__init__.py": "",
            "adapter/a.py": "from feedha.adapter import b\n",
            "adapter/b.py": "def later():\n    from feedha.adapter.c import x\n",
            "adapter/c.py": "from . import a\nx = 1\n",
            "adapter/link.py": "from feedha.admin_server.agent import RegistryAgent\n",
            "admin_server/__init__.py": "",
            "admin_server/agent.py": "RegistryAgent = object\n",
        },
    )
    result = _run(root)
    assert result.returncode == 1
    assert "proto/codec.py:1: imports zmq.asyncio; feedha.proto must not import zmq" in result.stderr
    assert (
        "adapter/link.py:1: imports feedha.admin_server.agent; feedha.adapter must not import "
        "feedha.admin_server" in result.stderr
    )
    assert "cycle between 3 file(s): adapter/a.py, adapter/b.py, adapter/c.py" in result.stderr
    assert "adapter/a.py -> adapter/b.py -> adapter/c.py -> adapter/a.py" in result.stderr


def test_type_checking_imports_make_a_cycle_and_break_layers(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "adapter/__init__.py": "",
            "adapter/state.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from feedha.adapter.conversion import M\n"
            ),
            "adapter/conversion.py": "from feedha.adapter.state import S\n",
            "client_lib/__init__.py": (
                "import typing\nif typing.TYPE_CHECKING:\n    import feedha.adapter.state\n"
            ),
        },
    )
    problems = check_layers.check(root, frozenset())
    assert problems == [
        "client_lib/__init__.py:3: imports feedha.adapter.state (under TYPE_CHECKING); feedha.client must "
        "not import feedha.adapter (what subscribers import must not pull in the adapter or the server)",
        "cycle between 2 file(s): adapter/conversion.py, adapter/state.py "
        "(e.g. adapter/conversion.py -> adapter/state.py -> adapter/conversion.py)",
    ]
    # Allowed, the cycle is no problem; allowed and gone, it is one (the list only shrinks).
    cycle = frozenset({"adapter/conversion.py", "adapter/state.py"})
    assert len(check_layers.check(root, {cycle})) == 1
    gone = frozenset({"adapter/state.py", "adapter/gone.py"})
    assert check_layers.check(root, {cycle, gone})[1:] == [
        "allowed cycle adapter/gone.py, adapter/state.py is gone: delete it from ALLOWED_CYCLES"
    ]


def test_allowed_cycles_and_self_imports(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "bench/__init__.py": "",
            "bench/x.py": "import feedha.bench.y\n",
            "bench/y.py": "from feedha.bench.x import run\n",
            "bench/z.py": "from feedha.bench import z\n",
        },
    )
    files = check_layers.parse_tree(root)
    allowed = frozenset({frozenset({"bench/x.py", "bench/y.py"})})
    assert check_layers.import_cycles(files, allowed) == [
        "cycle between 1 file(s): bench/z.py (e.g. bench/z.py -> bench/z.py)"
    ]


def test_from_package_import_name_leads_to_the_init_unless_name_is_a_module(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "feedha/__init__.py": "from feedha.cli import main\n",
            "feedha/cli.py": "from feedha import VERSION, ports\n",
            "feedha/ports.py": "",
            # A C extension (its stub, no .py): a module that imports nothing, not the package.
            "feedha/_speed.pyi": "def f() -> int: ...\n",
            "feedha/choice.py": "from feedha import _speed\n",
        },
    )
    graph = check_layers.import_graph(check_layers.parse_tree(root))
    assert graph["feedha/cli.py"] == {"feedha/__init__.py", "feedha/ports.py"}
    assert graph["feedha/choice.py"] == {"feedha/_speed.pyi"} and graph["feedha/_speed.pyi"] == set()
    assert check_layers.import_cycles(check_layers.parse_tree(root), frozenset()) == [
        "cycle between 2 file(s): feedha/__init__.py, feedha/cli.py "
        "(e.g. feedha/__init__.py -> feedha/cli.py -> feedha/__init__.py)"
    ]


def test_a_pure_core_that_reads_the_clock_or_a_socket_is_named(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "adapter/__init__.py": "",
            "adapter/core/__init__.py": "",
            "adapter/core/machine.py": "import time\nfrom feedha.adapter.runner import AdapterRunner\n",
            "adapter/runner.py": "import time\nimport zmq\nAdapterRunner = object\n",  # the shell may
            "client_lib/__init__.py": "",
            "client_lib/arbiter.py": "import zmq\n",
        },
    )
    result = _run(root)
    assert result.returncode == 1
    assert (
        "adapter/core/machine.py:1: imports time; feedha.adapter.core must not import time" in result.stderr
    )
    assert (
        "adapter/core/machine.py:2: imports feedha.adapter.runner; feedha.adapter.core must not import "
        "feedha.adapter.runner" in (result.stderr)
    )
    assert "client_lib/arbiter.py:1: imports zmq; feedha.client.arbiter must not import zmq" in result.stderr
    assert "adapter/runner.py" not in result.stderr


def test_an_import_that_bypasses_the_namespace_is_named(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "feedha/__init__.py": "",
            "feedha/demo.py": "from client_lib import FeedClient\n",
            "proto/__init__.py": "",
            "proto/wire.py": "from feedha import demo\n",
            "client_lib/__init__.py": "FeedClient = object\n",
        },
    )
    problems = check_layers.check(root, frozenset())
    assert problems == [
        "feedha/demo.py:1: imports client_lib; import it as feedha.client "
        "(everything installed lives in the feedha namespace)",
        "proto/wire.py:1: imports feedha; feedha.proto must not import feedha's commands "
        "(proto is pure contracts and codecs: every other package depends on it, never the reverse)",
    ]


def test_components_reach_the_root_folder_only_for_the_shared_plumbing(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "feedha/__init__.py": "",
            "feedha/settings.py": "from feedha import logs\n",
            "feedha/logs.py": "from feedha.proto import wire\n",
            "feedha/demo.py": "from feedha.adapter import main\n",
            "adapter/__init__.py": "",
            "adapter/main.py": "from feedha import settings\nfrom feedha import demo\n",
            "proto/__init__.py": "",
            "proto/wire.py": "",
        },
    )
    problems = check_layers.check(root, frozenset())
    assert any(p.startswith("adapter/main.py:2:") and "feedha's commands" in p for p in problems), problems
    assert any(p.startswith("feedha/logs.py:1: imports feedha.proto;") for p in problems), problems
    assert not any(
        p.startswith(("adapter/main.py:1", "feedha/settings.py", "feedha/demo.py")) for p in problems
    )


def test_nothing_of_the_product_imports_a_drill(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "feedha/__init__.py": "",
            "feedha/cli.py": "from feedha.drills import cli\n",
            "feedha/drills/__init__.py": "",
            "feedha/drills/cli.py": "from feedha.adapter import runner\nfrom feedha import cluster\n",
            "feedha/cluster.py": "",
            "adapter/__init__.py": "",
            "adapter/main.py": "from feedha.drills import cli\n",
            "adapter/runner.py": "import feedha.drills\n",
        },
    )
    problems = check_layers.check(root, frozenset())
    assert sorted(p.partition(";")[0] for p in problems) == [
        "adapter/main.py:1: imports feedha.drills",
        "adapter/runner.py:1: imports feedha.drills",
    ], problems
    assert all("must not import feedha's commands" in p for p in problems)


def test_the_plain_source_reaches_the_adapter_only_for_its_light_modules(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "plain_source/__init__.py": "",
            "plain_source/cli.py": (
                "from feedha.adapter.formats.capture_registry import CAPTURES\n"
                "import feedha.adapter.curve_keys\n"
                "from feedha.adapter.formats.registry import FORMATS\n"
                "from feedha.adapter.formats import capture_registry\n"
                "from feedha.adapter.core import AdapterCore\n"
            ),
            "adapter/__init__.py": "",
        },
    )
    (root / "pyproject.toml").write_text(NAMESPACE + '"feedha.plain_source" = "plain_source"\n')
    problems = check_layers.check(root, frozenset())
    assert [p.partition(";")[0] for p in problems] == [
        "plain_source/cli.py:3: imports feedha.adapter.formats.registry",
        "plain_source/cli.py:4: imports feedha.adapter.formats",  # only the module itself, by its name
        "plain_source/cli.py:5: imports feedha.adapter.core",
    ], problems
    assert all("feedha.plain_source must not import feedha.adapter" in p for p in problems)
