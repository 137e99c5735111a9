# Developer checks. `make check` runs lint, type, imports and test, as .ci/run does after installing
# the package with its dev extra (pip install -e '.[dev]'); every tool reads its settings from
# pyproject.toml, where the lists of today's known exceptions are (issue 28).
PYTHON ?= python
LINT_IMPORTS ?= lint-imports

.PHONY: check format lint type imports test test-slow docs docs-serve numbers numbers-check

check: lint type imports test test-slow

# Sort imports and apply ruff's safe fixes; the code is not run through `ruff format`.
format:
	$(PYTHON) -m ruff check --fix .

# ruff (pyflakes, pycodestyle, isort, complexity), then module size, complexity and import cycles.
lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) tools/check_limits.py

type:
	$(PYTHON) -m mypy

# import-linter: the layers of lyra_gym, lyra_gym without baselines/agents, no import cycles.
imports:
	$(LINT_IMPORTS)

# the default tier (a few CPU-minutes), then the slow tier (tests/conftest.py says what goes where)
test:
	$(PYTHON) -m pytest -q

test-slow:
	$(PYTHON) -m pytest -q -m slow

docs:
	d=$$(mktemp -d); NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict --site-dir $$d; rm -rf $$d

docs-serve:
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs serve

# Every generated table of the README and docs/ from its committed CSV, then the leaderboard page;
# `numbers-check` fails where a page and its CSV disagree (tests/structure/test_numbers_in_docs.py runs it).
numbers:
	$(PYTHON) tools/docs_numbers.py --write
	$(PYTHON) -m lyra_agents.leaderboard render

numbers-check:
	$(PYTHON) tools/docs_numbers.py --check
