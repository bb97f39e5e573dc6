"""scripts/gen_constants.py: the C headers hold Python's values, drift is refused, the builds are current."""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gen_constants.py"
# Which installed package each top-level folder is (pyproject.toml's [tool.feedha.namespace]).
NAMESPACE: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["feedha"][
    "namespace"
]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_constants", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_constants"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


gen_constants = _load()


def _copy(tmp_path: Path) -> Path:
    for header in gen_constants.HEADERS:
        for name in (header.path, *(name for pair in header.users() for name in pair)):
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / name, tmp_path / name)
    return tmp_path


def test_the_checked_in_headers_are_current() -> None:
    assert gen_constants.problems() == []


def test_the_headers_hold_the_python_values() -> None:
    from feedha.adapter.formats.feedha_fix import _fastpath_spec
    from feedha.adapter.journal import layout
    from feedha.proto import wire

    text = (ROOT / "adapter/conversion/_conversion_constants.h").read_text()
    assert f"#define MAX_PAYLOAD         {wire.MAX_PAYLOAD} /* proto/wire.py MAX_PAYLOAD */" in text
    text = (ROOT / "adapter/formats/feedha_fix/_fastpath_constants.h").read_text()
    assert f"#define OP_MEAN      {int(_fastpath_spec.Op.MEAN)} " in text
    text = (ROOT / "adapter/journal/_native_constants.h").read_text()
    assert f"#define RECORD_HEADER_SIZE {layout.RECORD_HEADER_SIZE} " in text
    assert f"#define STATUS_BAD_CRC     {layout.STATUSES.index(layout.DecodeStatus.BAD_CRC)} " in text


def test_a_string_constant_is_quoted_exported_as_a_string_and_declared_as_one() -> None:
    from feedha.adapter.conversion import book

    assert book.ENTRY_TYPES == "01245678BC"  # the sides, the session prices, volume, open interest
    text = (ROOT / "adapter/conversion/_orders_constants.h").read_text()
    assert '#define FX_TYPES  "01245678BC" /* adapter/conversion/book.py ENTRY_TYPES */' in text
    assert 'PyModule_AddStringConstant(module, "FX_TYPES", FX_TYPES)' in text
    assert "FX_TYPES: Final[str]" in (ROOT / "adapter/conversion/_orders.pyi").read_text()
    with pytest.raises(ValueError, match="not a plain ASCII string"):
        _ = gen_constants.Define("X", 'a"b', "here").c_value


@pytest.mark.parametrize(
    ("header", "source"),
    [(header, source) for header in gen_constants.HEADERS for source, _stub in header.users()],
    ids=lambda item: getattr(item, "path", item),
)
def test_each_extension_was_built_from_its_current_header(header, source) -> None:
    # A header regenerated without rebuilding the extension differs here: rebuild.
    folder, _, rest = source.removesuffix(".c").partition("/")
    package = {path: name for name, path in NAMESPACE.items()}[folder]  # client_lib/ is feedha.client
    module = importlib.import_module(f"{package}.{rest.replace('/', '.')}")
    for define in header.defines():
        assert getattr(module, define.name) == define.value, define


def test_a_stale_header_a_copy_in_c_and_an_undeclared_constant_are_refused(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    assert gen_constants.problems(root) == []
    header = root / "adapter/journal/_native_constants.h"
    header.write_text(
        header.read_text().replace("#define RECORD_HEADER_SIZE 36", "#define RECORD_HEADER_SIZE 40")
    )
    source = root / "adapter/formats/feedha_fix/_fastpath.c"
    source.write_text(source.read_text() + "\n#define MAX_PAYLOAD 65525\nenum { STOP_X, STOP_SLOW };\n")
    stub = root / "adapter/journal/_native.pyi"
    stub.write_text(stub.read_text().replace("STATUS_BAD_CRC: Final[int]\n", ""))
    assert gen_constants.problems(root) == [
        "adapter/formats/feedha_fix/_fastpath.c defines MAX_PAYLOAD itself: take it from "
        "adapter/conversion/_conversion_constants.h",
        "adapter/formats/feedha_fix/_fastpath.c defines STOP_SLOW itself: take it from "
        "adapter/conversion/_conversion_constants.h",
        "adapter/journal/_native_constants.h is stale: run python scripts/gen_constants.py",
        "adapter/journal/_native.pyi does not declare STATUS_BAD_CRC: Final[int]",
    ]
