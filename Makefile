# turnkit developer commands. `make quickstart` and `make test` do all set-up on a fresh machine first.
PYTHON ?= python3
PYTEST_ARGS ?=

.PHONY: setup test lint quickstart bench docs

setup:
	@bash .ci/setup.sh

# pytest exits 5 when it collects no tests; that is not a failure of the suite itself.
test: setup
	@$(PYTHON) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; rc=0; fi; exit $$rc

lint:
	ruff check turnkit tests benchmarks studies docs/sitegen
	ruff format --check turnkit tests benchmarks studies docs/sitegen
	lint-imports --no-logo

quickstart: setup
	$(PYTHON) -m turnkit.cli quickstart

bench: setup
	$(PYTHON) benchmarks/bench_envs.py

# The reference site into site/ (docs/release.md): fails on a missing docstring, a failing example, a broken link.
docs: setup
	$(PYTHON) docs/sitegen/build.py

.PHONY: lock fresh

# Re-resolve .ci/constraints.txt (the tested pins setup.sh installs) in a clean venv; commit the refresh on its own.
lock:
	@bash .ci/lock.sh $(LOCK_ARGS)

# Check `make test` and `make quickstart` on a fresh Debian root (root only; FRESH_ARGS="--only test", see --help).
fresh:
	@bash .ci/fresh.sh $(FRESH_ARGS)
