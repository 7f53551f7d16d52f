# The two commands of the README: `make run` and `make test`. Both build .venv by themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# pytest-xdist workers for `make test`, each a process with its own SparkSession and S3 server,
# whole test files to one worker: 2 took the suite from 26-30 minutes to 10.5-19 here (2026-11-28)
TEST_WORKERS ?= 2

.PHONY: run test lint typecheck bench clean venv java-client

venv: $(STAMP)

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip setuptools wheel
	$(PY) -m pip install --quiet -e '.[test,dev]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/kafkatier run --config conf/kafkatier.properties

test: $(STAMP)
	$(PY) -m ruff check . .ci/check_imports.py
	bash .ci/mypy.sh
	$(PY) .ci/check_imports.py
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=25

# Optional: Apache Kafka's Java client for tests/serve (skipped without it), fetched once.
java-client: $(STAMP)
	$(PY) tests/serve/clients/kafka_clients_jar.py

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

bench: $(STAMP)
	$(PY) bench/arrow_codec.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
