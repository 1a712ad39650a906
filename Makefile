# faultline: two commands on a fresh machine — `make demo` and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export FAULTLINE_HOME ?= $(CURDIR)

.PHONY: venv demo test kafka-up kafka-down kafka-jars topics peers clean bench

$(BIN)/faultline: pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@$(BIN)/pip install -q --upgrade pip >/dev/null
	@$(BIN)/pip install -q -e '.[test]'
	@touch $@

venv: $(BIN)/faultline

kafka-jars:
	@infra/kafka/kafka.sh jars

# a broker this checkout did not start already answering on the port (e.g. the shared dev
# broker of another checkout) is used as is; otherwise start ours
kafka-up:
	@if ! infra/kafka/kafka.sh status >/dev/null 2>&1 && (exec 3<>/dev/tcp/127.0.0.1/$${KAFKA_PORT:-9092}) 2>/dev/null; then \
		echo "kafka: 127.0.0.1:$${KAFKA_PORT:-9092} already answers (not started from this checkout): using it"; \
	else infra/kafka/kafka.sh up; fi

kafka-down:
	@infra/kafka/kafka.sh down

topics: venv kafka-up
	@$(BIN)/faultline topics create

peers:
	@infra/peers/install.sh

# peers first: it also installs python3-venv, Java and Maven that venv and kafka-jars need.
# PYTEST_WORKERS pytest-xdist processes, each with its own broker; the groups of
# tests/conftest.py keep tests that share a machine resource in one of them, one at a time.
# PYTEST_WORKERS=0: the old serial run in one process.
PYTEST_WORKERS ?= 2
test: peers venv kafka-jars
	@$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

demo: venv kafka-up
	@$(BIN)/faultline demo $(DEMO_ARGS)

bench: venv kafka-up
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	-@infra/kafka/kafka.sh down
	rm -rf var
