# The two commands of the README: `make demo` and `make test`. Both set up a
# fresh machine first (Debian packages, .venv, editable install).
VENV := .venv
STAMP := $(VENV)/.setup-stamp
BIN := $(VENV)/bin

.PHONY: setup native bytecode demo test test-slow check proto bench-smoke clean

$(STAMP): pyproject.toml scripts/setup
	bash scripts/setup
	touch $(STAMP)

setup: $(STAMP)

# The C extensions, rebuilt in place when a source or header they list (setup.py's
# `depends`) is newer than the built module: after a pull that changed C, the
# editable install would otherwise go on loading the old one.
native: setup
	$(BIN)/python setup.py -q build_ext --inplace

# The modules' bytecode, written once beside them (scripts/compile_bytecode.py):
# where PYTHONDONTWRITEBYTECODE is set, every process would compile them again.
bytecode: native
	$(BIN)/python scripts/compile_bytecode.py

demo: bytecode
	$(BIN)/feedha demo

# The default suite: unit, property and integration tests (< 10 min on 2 cores), two
# workers, each taking whole modules (--dist loadfile: a module's fixtures stay in one
# process). The slow drills below stay on one worker: they measure rates and pauses.
test: bytecode
	$(BIN)/python scripts/gen_proto.py --check
	$(BIN)/python scripts/gen_constants.py --check
	$(BIN)/pytest -m "not slow" -q -n 2 --dist loadfile --durations=25

# Longer drills, run by CI after the default suite (exit 5 = none collected is fine).
test-slow: bytecode
	$(BIN)/pytest -m slow -q --durations=30 || [ $$? -eq 5 ]

check: setup
	bash scripts/check

proto: setup
	$(BIN)/python scripts/gen_proto.py
	$(BIN)/python scripts/gen_constants.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache results
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
