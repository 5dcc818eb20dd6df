# Two commands: `make run` (set up, then the main sweep) and `make test` (set up, then the tests).
SWEEP ?= modes
ARGS ?=

.PHONY: setup run test lint typecheck
setup:
	bash scripts/setup.sh

run: setup
	.venv/bin/python -m orchestrator +sweep=$(SWEEP) $(ARGS)

test: setup
	bash scripts/test.sh

lint: setup
	.venv/bin/ruff check . && .venv/bin/ruff format --check .

typecheck: setup
	.venv/bin/mypy
