# The few commands a contributor needs. Everything runs inside .venv (created on demand).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
EXAMPLE := examples/a100_vllm

.PHONY: help install test lint example bench bench-large bench-kineto bench-shared docs docs-check

help:
	@echo "make install      create $(VENV) and install the project with test extras"
	@echo "make test         run the test suite"
	@echo "make lint         ruff check + mypy src + the layer contract (lint-imports)"
	@echo "make example      write the synthetic example trace and its report ($(EXAMPLE)/report)"
	@echo "make bench        benchmarks on a medium synthetic trace (bench-large: large)"
	@echo "make bench-kineto benchmark on a 1 GB synthetic PyTorch profiler trace"
	@echo "make bench-shared the CLI on every shared real trace: wall time, report.json size"
	@echo "make docs         regenerate docs/rules.md, docs/metrics/README.md, README CLI reference"
	@echo "make docs-check   fail when the generated docs are out of date"

install:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -e '.[test]'
	@# Byte-compile the sources once, also where PYTHONDONTWRITEBYTECODE is set: every run starts faster.
	$(BIN)/python -m compileall -q src

# Installs only when the project is not installed in the virtualenv yet.
$(BIN)/nsys-llm-explain:
	$(MAKE) install

test:
	$(BIN)/python -m pytest

lint:
	@test -x $(BIN)/ruff -a -x $(BIN)/mypy -a -x $(BIN)/lint-imports || $(BIN)/pip install -e '.[dev]'
	$(BIN)/ruff check src tests
	$(BIN)/mypy src
	$(BIN)/lint-imports

example: $(BIN)/nsys-llm-explain
	rm -f $(EXAMPLE)/trace.sqlite
	$(BIN)/python $(EXAMPLE)/make_trace.py --out $(EXAMPLE)/trace.sqlite
	$(BIN)/nsys-llm-explain $(EXAMPLE)/trace.sqlite --out $(EXAMPLE)/report --force --phase-map $(EXAMPLE)/phases.json
	@# A screenshot of report.html when Chromium is installed (the browser test installs it in CI).
	@if command -v chromium >/dev/null 2>&1; then \
	  profile=$$(mktemp -d); \
	  chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
	    --disable-component-update --disable-sync --no-first-run --disable-quic \
	    --user-data-dir=$$profile --window-size=1280,2400 \
	    --screenshot=$(EXAMPLE)/report/report.screenshot.png \
	    file://$(CURDIR)/$(EXAMPLE)/report/report.html >/dev/null 2>&1 \
	    && echo "screenshot: $(EXAMPLE)/report/report.screenshot.png"; \
	  rm -rf $$profile; \
	else echo "screenshot skipped: chromium not found"; fi

bench: $(BIN)/nsys-llm-explain $(FLOORS)/bin/python
	$(BIN)/python benchmarks/run.py --size medium

# The read floors the large benchmarks are judged against (ADBC, msgspec) run in their own
# virtualenv, so that the tool is timed on its default install.
FLOORS := .venv-floors
$(FLOORS)/bin/python: benchmarks/floors-requirements.txt
	$(PYTHON) -m venv $(FLOORS)
	$(FLOORS)/bin/pip install -q -r benchmarks/floors-requirements.txt

bench-large: $(BIN)/nsys-llm-explain $(FLOORS)/bin/python
	$(BIN)/python benchmarks/run.py --size large

bench-kineto: $(BIN)/nsys-llm-explain $(FLOORS)/bin/python
	$(BIN)/python benchmarks/run.py --size kineto

bench-shared: $(BIN)/nsys-llm-explain
	$(BIN)/python benchmarks/run.py --shared --repeat 5

docs: $(BIN)/nsys-llm-explain
	$(BIN)/python -m nsys_llm_explainer.cli.docs_gen

docs-check: $(BIN)/nsys-llm-explain
	$(BIN)/python -m nsys_llm_explainer.cli.docs_gen --check
