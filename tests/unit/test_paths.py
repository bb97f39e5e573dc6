"""scripts/check_paths.py: the repository names no missing path; a tree that does is refused, by name."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_paths.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_paths", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_paths"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


check_paths = _load()


def _run(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True, timeout=60, check=False
    )


def _tree(root: Path, files: dict[str, str]) -> Path:
    files = {
        "pyproject.toml": '[tool.feedha.namespace]\n"feedha" = "feedha"\n"feedha.client" = "client_lib"\n',
        "feedha/__init__.py": "",
        "client_lib/__init__.py": "from feedha.client.arbiter import Arbiter\n",
        "client_lib/arbiter.py": '"""The arbiter."""\n\n\nclass Arbiter:\n    pass\n',
        "docs/wire-format.md": "# Wire format\n",
        "tests/unit/test_arbiter.py": "",
        **files,
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


GOOD = {
    "README.md": """\
        See `client_lib/arbiter.py`, [the format](docs/wire-format.md#packet), CONTRIBUTING.md,
        `feedha.client.arbiter.Arbiter`, `feedha/client/arbiter.py`, ``client_lib.arbiter``,
        `proto/*_pb2.py`, `results/REPORT.md`, https://example.com/docs/missing.md and /etc/hosts.
        """,
    "CONTRIBUTING.md": "Run `python client_lib/arbiter.py::test_x` (`feedha.v1.MarketUpdate` is protobuf).\n",
    "client_lib/helper.py": '"""Uses :class:`~client_lib.arbiter.Arbiter` (docs/wire-format.md)."""\n\n'
    "x = 'docs/not-checked-in-code.md'  # see feedha.client.arbiter\n",
}


def test_the_repository_passes() -> None:
    assert check_paths.check(ROOT) == []


def test_a_tree_whose_references_resolve_passes(tmp_path: Path) -> None:
    root = _tree(tmp_path, GOOD)
    assert check_paths.check(root) == []
    assert _run(root).returncode == 0


def test_every_kind_of_missing_reference_is_named(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            **GOOD,
            "README.md": GOOD["README.md"] + "The rules are in `client_lib/sync.py` (see GUIDE.md).\n",
            "docs/guide.md": "Back to [the README](../README.md), on to [the journal](journal.md).\n",
            "client_lib/helper.py": '"""See :mod:`client_lib.gone` and feedha.client.arbiter.Nope."""\n\n'
            "# tests/unit/test_gone.py::test_it checks it\n",
        },
    )
    found = {(m.path, m.reference) for m in check_paths.check(root)}
    assert found == {
        ("README.md", "client_lib/sync.py"),
        ("README.md", "GUIDE.md"),
        ("docs/guide.md", "journal.md"),
        ("client_lib/helper.py", "client_lib.gone"),
        ("client_lib/helper.py", "feedha.client.arbiter.Nope"),
        ("client_lib/helper.py", "tests/unit/test_gone.py"),
    }
    result = _run(root)
    assert result.returncode == 1
    assert "README.md:4: client_lib/sync.py does not exist" in result.stderr
    assert "docs/guide.md:1: journal.md (a link) does not exist" in result.stderr
    assert (
        "feedha.client.arbiter.Nope names Nope, which client_lib/arbiter.py does not define" in result.stderr
    )
