#!/usr/bin/env python3
"""Regenerate the protobuf and gRPC code under proto/ from proto/*.proto.

Usage:
    python scripts/gen_proto.py          # rewrite proto/*_pb2.py, *_pb2.pyi, *_pb2_grpc.py
    python scripts/gen_proto.py --check  # exit 1 if the checked-in code is stale

The .proto files are compiled with the repository root on the include path, so
generated modules import each other as ``from proto import market_pb2``.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")


def _generate(out_root: Path) -> list[Path]:
    from grpc_tools import protoc  # dev dependency: only needed to regenerate

    sources = sorted(PROTO_DIR.glob("*.proto"))
    if not sources:
        raise SystemExit("no .proto files under proto/")
    include = Path(protoc.__file__).parent / "_proto"
    (out_root / "proto").mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"-I{ROOT}",
        f"-I{include}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *[str(p.relative_to(ROOT)) for p in sources],
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    generated = [p for p in sorted((out_root / "proto").iterdir()) if p.name.endswith(GENERATED_SUFFIXES)]
    # grpc_tools writes a *_pb2_grpc.py for every file; drop the empty ones
    # (files without a service) so the tree holds only code that does something.
    kept = []
    for path in generated:
        if path.name.endswith("_pb2_grpc.py") and "Servicer" not in path.read_text():
            path.unlink()
            continue
        kept.append(path)
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--check", action="store_true", help="fail if generated code is stale; change nothing"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        fresh = _generate(Path(tmp))
        fresh_names = {p.name for p in fresh}
        current = {p.name for p in PROTO_DIR.iterdir() if p.name.endswith(GENERATED_SUFFIXES)}
        if args.check:
            stale = sorted(
                name
                for name in fresh_names | current
                if name not in fresh_names
                or name not in current
                or not filecmp.cmp(Path(tmp) / "proto" / name, PROTO_DIR / name, shallow=False)
            )
            if stale:
                print("generated code is stale, run: python scripts/gen_proto.py", file=sys.stderr)
                for name in stale:
                    print(f"  proto/{name}", file=sys.stderr)
                return 1
            return 0
        for name in current - fresh_names:
            (PROTO_DIR / name).unlink()
        for path in fresh:
            shutil.copyfile(path, PROTO_DIR / path.name)
        print(f"generated {len(fresh)} files under proto/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
