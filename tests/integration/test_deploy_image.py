"""deploy/Dockerfile against what the package needs (no container engine runs here).

The build stage must get everything ``pip wheel .`` reads: pyproject.toml,
setup.py, the readme, every folder of ``[tool.feedha.namespace]`` and the C
sources setup.py compiles; it must build the extensions and pyzmq with
OpenPGM. The runtime stage must take only the build stage's wheels (no
compiler, no source tree), install every extra the manifests' commands need,
check that the compiled parts import, and run as the user the manifests name.
"""

from __future__ import annotations

import ast
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from feedha.cli import EXTRAS

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
COMPILERS = ("build-essential", "gcc", "g++", "clang", "-dev", "pkg-config")


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)  # (INSTRUCTION, arguments)

    def all(self, instruction: str) -> list[str]:
        return [args for kind, args in self.instructions if kind == instruction]


def parse_dockerfile(text: str) -> list[Stage]:
    """Stages of a Dockerfile, each with its instructions (continuations joined, comments dropped)."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        if raw.lstrip().startswith("#") and not pending:
            continue
        if raw.endswith("\\"):
            pending += raw[:-1] + " "
            continue
        if raw.strip() or pending:
            lines.append(pending + raw)
        pending = ""
    stages: list[Stage] = []
    for line in lines:
        kind, _space, args = line.strip().partition(" ")
        kind = kind.upper()
        if kind == "FROM":
            words = args.split()
            name = words[2] if len(words) > 2 and words[1].upper() == "AS" else str(len(stages))
            stages.append(Stage(name=name, base=words[0]))
        else:
            assert stages, f"{kind} before FROM"
            stages[-1].instructions.append((kind, args.strip()))
    return stages


def copies(stage: Stage) -> list[tuple[list[str], str, str | None]]:
    """The stage's COPY instructions as (sources, destination, --from stage)."""
    out = []
    for args in stage.all("COPY"):
        words = shlex.split(args)
        source_stage = next((w.split("=", 1)[1] for w in words if w.startswith("--from=")), None)
        paths = [w for w in words if not w.startswith("--")]
        out.append((paths[:-1], paths[-1], source_stage))
    return out


STAGES = parse_dockerfile(DOCKERFILE.read_text())
BUILD, RUNTIME = STAGES[0], STAGES[-1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _copied(stage: Stage) -> set[str]:
    return {source.rstrip("/") for sources, _dest, frm in copies(stage) if frm is None for source in sources}


def _setup_sources() -> set[str]:
    """Every file path setup.py names (its extensions' sources and headers)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"[\w/]+\.[ch]", node.value)
    }


def test_two_stages_a_build_and_a_runtime() -> None:
    assert len(STAGES) == 2 and BUILD.name == "build"
    assert BUILD.base == RUNTIME.base  # the wheels are built for the Python that runs them


def test_the_build_stage_copies_what_setup_py_needs() -> None:
    copied = _copied(BUILD)
    assert {"pyproject.toml", "setup.py", PYPROJECT["project"]["readme"]} <= copied
    folders = set(PYPROJECT["tool"]["feedha"]["namespace"].values())
    missing = folders - copied
    assert not missing, f"deploy/Dockerfile does not copy {sorted(missing)} (in [tool.feedha.namespace])"
    sources = _setup_sources()
    assert {"adapter/formats/feedha_fix/_fastpath.c", "adapter/journal/_native.c"} <= sources
    for path in sources:
        assert path.split("/")[0] in copied and (ROOT / path).exists(), path


def test_the_build_stage_compiles_the_extensions_and_pyzmq_with_openpgm() -> None:
    runs = " ".join(BUILD.all("RUN"))
    assert "build-essential" in runs and "libzmq3-dev" in runs
    assert "pip wheel" in runs and "--no-binary pyzmq" in runs
    extensions = re.findall(r'Extension\(\s*"([\w.]+)"', (ROOT / "setup.py").read_text())
    assert "feedha.adapter._pump" in extensions and len(extensions) == len(set(extensions))
    assert f"len(built) == {len(extensions)}" in runs  # the wheel is checked for every compiled module


def test_the_runtime_stage_takes_only_the_wheels() -> None:
    runtime_copies = copies(RUNTIME)
    assert runtime_copies and all(frm == BUILD.name for _sources, _dest, frm in runtime_copies)
    runs = " ".join(RUNTIME.all("RUN"))
    installed = re.findall(r"apt-get install [^&]*", runs)
    assert installed and not any(word in " ".join(installed) for word in COMPILERS)
    assert "libzmq5" in " ".join(installed)  # what pyzmq was linked against
    assert "--no-index" in runs  # nothing from an index: exactly the wheels built above


def test_the_runtime_installs_every_extra_the_manifests_run() -> None:
    import yaml

    runs = " ".join(RUNTIME.all("RUN"))
    match = re.search(r"'feedha\[([a-z,]+)\]'", runs)
    assert match, "the runtime stage installs no feedha[...]"
    installed = set(match.group(1).split(","))
    assert f"'.[{match.group(1)}]'" in " ".join(BUILD.all("RUN"))  # the wheels are built for the same extras
    commands = set()
    for manifest in sorted((ROOT / "deploy").glob("*/*.yaml")):
        for doc in yaml.safe_load_all(manifest.read_text()):
            text = yaml.safe_dump(doc or {})
            commands |= set(re.findall(r"- feedha\n\s*- ([a-z-]+)", text))
            if "spark-submit" in text:
                commands.add("feed")
    assert {"adapter", "admin-server", "feed"} <= commands
    for command in commands:
        assert set(EXTRAS.get(command, ())) <= installed, command


def test_the_runtime_checks_its_compiled_parts_and_runs_as_the_manifests_user() -> None:
    runs = " ".join(RUNTIME.all("RUN"))
    for module in re.findall(r'Extension\(\s*"([\w.]+)"', (ROOT / "setup.py").read_text()):
        assert module in runs, module
    assert 'zmq.has("pgm")' in runs
    (user,) = RUNTIME.all("USER")
    assert user == "10001" and "--uid 10001" in runs and "--gid 10001" in runs
    assert RUNTIME.all("ENTRYPOINT") == ['["/usr/bin/tini", "--"]']


def test_the_build_context_keeps_what_the_build_copies() -> None:
    ignored = [
        line.strip()
        for line in (ROOT / "deploy" / "Dockerfile.dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for path in _copied(BUILD):
        assert not any(Path(path).match(pattern) for pattern in ignored), path
    assert "**/*.so" in ignored  # a developer's in-place build never reaches the image


@pytest.mark.parametrize("folder", sorted(set(PYPROJECT["tool"]["feedha"]["namespace"].values())))
def test_a_missing_folder_would_be_caught(folder: str) -> None:
    text = DOCKERFILE.read_text().replace(f"COPY {folder} {folder}\n", "")
    assert folder not in _copied(parse_dockerfile(text)[0])
