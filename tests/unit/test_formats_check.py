"""scripts/check_formats.py: only a format's folder and the registry name it; the real tree keeps to that."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_formats.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_formats", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_formats"] = module
    spec.loader.exec_module(module)
    return module


check_formats = _load()

NAMESPACE = (
    '[tool.feedha.namespace]\n"feedha" = "feedha"\n"feedha.adapter" = "adapter"\n'
    '"feedha.client" = "client_lib"\n"feedha.bench" = "bench"\n'
)
FORMAT = 'from feedha.adapter.formats.interface import Format\nFORMAT = Format(name="{name}")\n'


def _tree(root: Path, files: dict[str, str]) -> Path:
    (root / "pyproject.toml").write_text(NAMESPACE)
    base = {
        "adapter/__init__.py": "",
        "adapter/formats/__init__.py": '"""The formats (``fix44`` named in a docstring is fine)."""\n',
        "adapter/formats/fix44/__init__.py": "",
        "adapter/formats/fix44/format.py": FORMAT.format(name="fix44"),
        "adapter/formats/fix44/engine.py": "from feedha.adapter.formats.fix44 import format\n",
        "adapter/formats/feedha_fix/format.py": FORMAT.format(name="feedha-fix"),
        "adapter/formats/registry.py": "from feedha.adapter.formats.fix44 import format\nNAME = 'fix44'\n",
        "client_lib/__init__.py": "",
        "bench/__init__.py": "",
        "bench/fix44_bench.py": "import feedha.adapter.formats.fix44.engine\nNAME = 'fix44'\n",
    }
    for name, text in {**base, **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_real_tree_keeps_the_formats_in_their_folders() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(ROOT)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr


def test_the_formats_folders_the_registry_bench_and_docstrings_may_name_a_format(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"adapter/runner.py": '"""Runs any format, ``fix44`` too."""\n'})
    assert check_formats.format_folders(root) == {"feedha_fix": "feedha-fix", "fix44": "fix44"}
    assert check_formats.check(root, {}) == []


def test_a_name_or_a_format_import_outside_is_named_with_its_line(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "adapter/config.py": "x = 1\nDEFAULT = 'feedha-fix'\n",
            "client_lib/feed.py": "from feedha.adapter.formats.fix44.engine import Engine\n",
            "client_lib/capture.py": "import feedha.plain_source.fix44_capture\n",
            "adapter/core.py": "if kind == 'fix44x':\n    pass\n",  # not a name: another word
        },
    )
    problems = check_formats.check(root, {})
    assert [p.split(";")[0] for p in problems] == [
        "adapter/config.py:2: names the format 'feedha-fix'",
        "client_lib/capture.py:1: imports feedha.plain_source.fix44_capture, "
        "'fix44_capture' is format-specific",
        "client_lib/feed.py:1: imports feedha.adapter.formats.fix44.engine, 'fix44' is format-specific",
    ]


def test_an_allowed_file_passes_until_it_no_longer_offends(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"adapter/config.py": "DEFAULT = 'feedha-fix'\n"})
    assert check_formats.check(root, {"adapter/config.py": "why"}) == []
    (root / "adapter/config.py").write_text("DEFAULT = None\n")
    assert check_formats.check(root, {"adapter/config.py": "why"}) == [
        "adapter/config.py: in ALLOWED of scripts/check_formats.py but names no format now: delete its entry"
    ]
