# The two commands of the README: `make demo` and `make test`. Both set up a
# fresh machine first (Debian packages, .venv, editable install).
VENV := .venv
STAMP := $(VENV)/.setup-stamp
BIN := $(VENV)/bin

.PHONY: setup demo test test-slow check proto bench-smoke clean

$(STAMP): pyproject.toml scripts/setup
	bash scripts/setup
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/feedha demo

# The default suite: unit, property and integration tests (< 10 min on 2 cores).
test: setup
	$(BIN)/python scripts/gen_proto.py --check
	$(BIN)/python scripts/gen_constants.py --check
	$(BIN)/pytest -m "not slow" -q --durations=25

# Longer drills, run by CI after the default suite (exit 5 = none collected is fine).
test-slow: setup
	$(BIN)/pytest -m slow -q || [ $$? -eq 5 ]

check: setup
	bash scripts/check

proto: setup
	$(BIN)/python scripts/gen_proto.py
	$(BIN)/python scripts/gen_constants.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache results
