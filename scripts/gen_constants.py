#!/usr/bin/env python3
"""Write the C headers of the constants the C extensions share with Python, from Python.

Usage:
    python scripts/gen_constants.py          # rewrite the headers
    python scripts/gen_constants.py --check  # exit 1 if a header is stale or C copies a constant

Theory of operation
-------------------
Every number that both a C extension and Python need is defined once, in
Python, where the rest of its contract lives: the wire block in
``proto/wire.py``, the journal record in ``adapter/journal/layout.py``, the
fast path's spec in ``adapter/formats/feedha_fix/_fastpath_spec.py`` and its stop
reasons in ``adapter/conversion/engine.py``, the journal's ``Record`` in
``adapter/journal/format.py``. :data:`HEADERS` says which
header gets which; each constant becomes ``#define NAME value`` with the
Python name it comes from, and the header ends with ``fh_add_constants``,
which the extension calls to export every one as a module attribute (a test
compares those with Python's, so an extension built from an older header is
caught too).

``--check`` fails when a header differs from what this script writes, when a
C file defines (``#define`` or ``enum``) one of its header's names itself (a
copy by hand is the drift this script exists to prevent), and when the
extension's ``.pyi`` does not declare every exported constant.
"""

from __future__ import annotations

import argparse
import enum
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent


@dataclass(frozen=True, slots=True)
class Define:
    """One constant: its C name, its value and the Python name it comes from."""

    name: str
    value: int | str  # a str is an ASCII string constant
    source: str

    @property
    def c_value(self) -> str:
        """The value as C writes it."""
        if isinstance(self.value, int):
            return str(self.value)
        if not self.value.isascii() or not self.value.isprintable() or any(c in self.value for c in '"\\'):
            raise ValueError(f"{self.name}: {self.value!r} is not a plain ASCII string")
        return f'"{self.value}"'

    @property
    def python_type(self) -> str:
        """The type a stub declares it with."""
        return type(self.value).__name__


def _path(module: ModuleType) -> str:
    return Path(str(module.__file__)).resolve().relative_to(ROOT).as_posix()


def constant(module: ModuleType, name: str, c_name: str | None = None) -> Define:
    """``module.name`` as ``#define C_NAME value`` (``C_NAME`` defaults to ``name``)."""
    value = getattr(module, name)
    if not isinstance(value, (int, str)):
        raise TypeError(f"{module.__name__}.{name} is neither an int nor a str: {value!r}")
    return Define(c_name or name, value if isinstance(value, str) else int(value), f"{_path(module)} {name}")


def members(prefix: str, enumeration: type[enum.Enum], module: ModuleType) -> list[Define]:
    """``PREFIX_MEMBER`` per member of an int enum, or per member of any enum by its position."""
    found = []
    for position, member in enumerate(enumeration):
        value = member.value if isinstance(member, enum.IntEnum) else position
        source = f"{_path(module)} {enumeration.__name__}.{member.name}"
        found.append(Define(f"{prefix}_{member.name}", int(value), source))
    return found


def _conversion() -> list[Define]:
    # What every format's C run shares: the wire block's limits and why a run stopped.
    from feedha.adapter.conversion import engine
    from feedha.proto import wire

    return [
        constant(wire, "BLOCK_OVERHEAD"),
        constant(wire, "BLOCK_LENGTH_COVERS"),
        constant(wire, "MAX_PAYLOAD"),
        constant(wire, "MAX_SOURCE_SEQ"),
        *members("STOP", engine.Stop, engine),
    ]


def _fastpath() -> list[Define]:
    # feedha-fix's fast path only: the spec it reads (op codes, time and price kinds).
    from feedha.adapter.formats.feedha_fix import _fastpath_spec as spec

    return [
        Define("ENV_FIXED", len(spec.ENV_INPUTS), f"{_path(spec)} len(ENV_INPUTS)"),
        constant(spec, "MAX_EXTRAS"),
        *members("OP", spec.Op, spec),
        Define("OP_COUNT", len(spec.Op), f"{_path(spec)} len(Op)"),
        *members("TIME", spec.TimeKind, spec),
        *members("PRICE", spec.PriceKind, spec),
    ]


def _pump() -> list[Define]:
    from feedha.adapter.conversion import engine
    from feedha.adapter.core import output, pipeline, pumping
    from feedha.proto import wire

    return [
        constant(wire, "HEADER_SIZE"),
        constant(wire, "VERSION"),
        constant(wire, "MAX_COUNT"),
        Define("MAGIC_0", wire.MAGIC[0], f"{_path(wire)} MAGIC[0]"),
        Define("MAGIC_1", wire.MAGIC[1], f"{_path(wire)} MAGIC[1]"),
        *members("STOP", engine.Stop, engine),
        *members("PUMP", pumping.PumpStop, pumping),
        *members("PUMP_MODE", pumping.PumpMode, pumping),
        *members("HELD", pumping.HeldKind, pumping),
        constant(output, "UNBOUNDED_ROOM"),
        constant(pipeline, "UNBOUNDED_COUNT"),
    ]


def _journal() -> list[Define]:
    from feedha.adapter.journal import format as record_format
    from feedha.adapter.journal import layout

    return [
        constant(layout, "RECORD_HEADER_SIZE"),
        constant(layout, "MAX_PAYLOAD_BYTES"),
        constant(layout, "CONTROL_FLAGS"),
        *members("STATUS", layout.DecodeStatus, layout),
        # decode_records builds record_type (a Record) item by item.
        Define(
            "RECORD_FIELDS", len(record_format.Record._fields), f"{_path(record_format)} len(Record._fields)"
        ),
    ]


def _blocks() -> list[Define]:
    from feedha.proto import wire

    return [
        constant(wire, "HEADER_SIZE"),
        Define("BLOCK_OVERHEAD", wire.BLOCK_HEADER.size, f"{_path(wire)} BLOCK_HEADER.size"),
        constant(wire, "TOMBSTONE_STREAM"),
    ]


def _drain() -> list[Define]:
    from feedha.transport import frames

    return [constant(frames, "WRONG_PARTS"), constant(frames, "OTHER_TOPIC")]


def _orders() -> list[Define]:
    # What fix44's C run (Fix44Run) shares with the Python book it must match.
    from feedha.adapter.conversion import book

    return [
        constant(book, "NEW", "FX_NEW"),
        constant(book, "CHANGE", "FX_CHANGE"),
        constant(book, "DELETE", "FX_DELETE"),
        constant(book, "ENTRY_TYPES", "FX_TYPES"),
    ]


@dataclass(frozen=True, slots=True)
class Header:
    """A generated header: the C file that includes it, its stub, and its constants.

    ``also``: other (C file, stub) pairs that include it and export its constants too.
    ``function``: the name of its exporting function (a C file that includes two headers
    calls both).
    """

    path: str
    source: str
    stub: str
    defines: Callable[[], list[Define]]
    also: tuple[tuple[str, str], ...] = ()
    function: str = "fh_add_constants"

    def users(self) -> tuple[tuple[str, str], ...]:
        """Every (C file, stub) pair that includes the header."""
        return ((self.source, self.stub), *self.also)


HEADERS: Final = (
    Header(
        "adapter/conversion/_conversion_constants.h",
        "adapter/formats/feedha_fix/_fastpath.c",
        "adapter/formats/feedha_fix/_fastpath.pyi",
        _conversion,
        also=(("adapter/conversion/_orders.c", "adapter/conversion/_orders.pyi"),),
    ),
    Header(
        "adapter/formats/feedha_fix/_fastpath_constants.h",
        "adapter/formats/feedha_fix/_fastpath.c",
        "adapter/formats/feedha_fix/_fastpath.pyi",
        _fastpath,
        function="fh_add_fastpath_constants",
    ),
    Header(
        "adapter/conversion/_orders_constants.h",
        "adapter/conversion/_orders.c",
        "adapter/conversion/_orders.pyi",
        _orders,
        function="fh_add_orders_constants",
    ),
    Header(
        "adapter/_pump_constants.h",
        "adapter/_pump.c",
        "adapter/_pump.pyi",
        _pump,
    ),
    Header(
        "adapter/journal/_native_constants.h",
        "adapter/journal/_native.c",
        "adapter/journal/_native.pyi",
        _journal,
    ),
    Header(
        "client_lib/_blocks_constants.h",
        "client_lib/_blocks.c",
        "client_lib/_blocks.pyi",
        _blocks,
    ),
    Header(
        "transport/_drain_constants.h",
        "transport/_drain.c",
        "transport/_drain.pyi",
        _drain,
    ),
)


def _adder(define: Define) -> str:
    return "PyModule_AddIntConstant" if isinstance(define.value, int) else "PyModule_AddStringConstant"


def header_text(header: Header, defines: list[Define]) -> str:
    """The text of ``header`` holding ``defines``."""
    guard = "FEEDHA_" + re.sub(r"[^A-Za-z0-9]+", "_", header.path.removesuffix(".h")).upper() + "_H"
    width = max(len(d.name) for d in defines)
    users = [source for source, _stub in header.users()]
    lines = [
        "/*",
        " * Generated by scripts/gen_constants.py: do not edit. The constants",
        f" * {' and '.join(users)} {'share' if len(users) > 1 else 'shares'} with Python,",
        f" * each defined once in the Python file named beside it; {header.function}",
        " * exports them from the module. Include it after Python.h.",
        " */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        *(f"#define {d.name:<{width}} {d.c_value} /* {d.source} */" for d in defines),
        "",
        "/* Adds every constant above to the module: 0, or -1 with an exception. */",
        f"static int {header.function}(PyObject *module) {{",
        *(f'    if ({_adder(d)}(module, "{d.name}", {d.name}) < 0) return -1;' for d in defines),
        "    return 0;",
        "}",
        "",
        f"#endif /* {guard} */",
        "",
    ]
    return "\n".join(lines)


def problems(root: Path = ROOT) -> list[str]:
    """What ``--check`` finds under ``root``: stale headers, copies in C, undeclared constants."""
    found = []
    for header in HEADERS:
        defines = header.defines()
        path = root / header.path
        if not path.exists() or path.read_text() != header_text(header, defines):
            found.append(f"{header.path} is stale: run python scripts/gen_constants.py")
        for source_path, stub_path in header.users():
            source = (root / source_path).read_text()
            stub = (root / stub_path).read_text()
            for define in defines:
                name = re.escape(define.name)
                if re.search(
                    rf"^\s*#\s*define\s+{name}\b|\benum\s*\{{[^}}]*\b{name}\b", source, re.MULTILINE
                ):
                    found.append(f"{source_path} defines {define.name} itself: take it from {header.path}")
                declared = f"Final[{define.python_type}]"
                if not re.search(rf"^{name}: {re.escape(declared)}$", stub, re.MULTILINE):
                    found.append(f"{stub_path} does not declare {define.name}: {declared}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="fail on a stale header; change nothing")
    args = parser.parse_args(argv)
    if args.check:
        found = problems()
        for problem in found:
            print(problem, file=sys.stderr)
        return 1 if found else 0
    for header in HEADERS:
        (ROOT / header.path).write_text(header_text(header, header.defines()))
    print(f"generated {len(HEADERS)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
