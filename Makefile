# faultline: two commands on a fresh machine — `make demo` and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export FAULTLINE_HOME ?= $(CURDIR)

# the client port of the broker `make kafka-up` starts (infra/kafka/kafka.sh) and that
# `make demo` / `make topics` / `make bench` point faultline at, unless FAULTLINE_KAFKA_BOOTSTRAP says otherwise
KAFKA_PORT ?= 9092

.PHONY: venv venv-test demo test kafka-up kafka-down kafka-jars topics peers clean bench realjobs-sites notebook

# setuptools prints a 10-line notice on every editable install ("Editable installation ...
# folders with the same name as your package"): informational, filtered by its message only.
PIP_INSTALL := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip install -q

# the runtime dependencies only (make demo); the test extra comes with make test
$(BIN)/faultline: pyproject.toml setup.py
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@$(BIN)/pip install -q --upgrade pip >/dev/null
	@$(PIP_INSTALL) -e .
	@touch $@

$(VENV)/.test-extra: $(BIN)/faultline
	@$(PIP_INSTALL) -e '.[test]'
	@touch $@

venv: $(BIN)/faultline
venv-test: $(VENV)/.test-extra

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

demo topics bench: export FAULTLINE_KAFKA_BOOTSTRAP ?= 127.0.0.1:$(KAFKA_PORT)
topics: venv kafka-up
	@$(BIN)/faultline topics create

peers:
	@infra/peers/install.sh

# peers first: it also installs python3-venv, Java and Maven that venv and kafka-jars need.
# PYTEST_WORKERS pytest-xdist processes, each with its own broker; the groups of
# tests/conftest.py keep tests that share a machine resource in one of them, one at a time.
# PYTEST_WORKERS=0: the old serial run in one process.
# the framework libraries (transformers, accelerate, pytorch-lightning) the realjobs tests run
# under /usr/bin/python3, into var/realjobs-site/ (~30-60 s the first time, then a no-op)
# not fatal: when a pin is missing on the index the two integration tests report it themselves,
# and the rest of the suite still runs
realjobs-sites: venv peers
	@$(BIN)/python tests/realjobs/realjobs_sites.py || echo "realjobs-sites: not installed (the realjobs tests say why); make test goes on" >&2

PYTEST_WORKERS ?= 2
test: peers venv-test kafka-jars realjobs-sites
	@$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# notebooks/trends.ipynb executed headless on the store -> var/notebook/trends.ipynb (+ .html); the store
# path absolute: the kernel runs in var/notebook/
notebook: $(VENV)/.notebook-extra
	@$(BIN)/python notebooks/run.py --store "$$(realpath -m "$${FAULTLINE_STORE:-var/store}")"

$(VENV)/.notebook-extra: $(BIN)/faultline
	@$(PIP_INSTALL) -e '.[notebook]'
	@touch $@

demo: venv kafka-up
	@$(BIN)/faultline demo $(DEMO_ARGS)

# every bench/*.py at bench sizes -> bench/results.json and README's bench block (bench/run.py,
# BENCH_ARGS e.g. --quick or --only worker); not part of make test
bench: $(VENV)/.bench-extra kafka-up
	@$(BIN)/python bench/run.py $(BENCH_ARGS)

$(VENV)/.bench-extra: $(BIN)/faultline
	@$(PIP_INSTALL) -e '.[bench]'
	@touch $@

clean:
	-@infra/kafka/kafka.sh down
	rm -rf var
