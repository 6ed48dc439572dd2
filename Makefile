# `make demo` and `make test` are the two commands a fresh machine needs; both create .venv themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: venv test lint typecheck unit browser docker-tools docs demo bench clean stress holdout

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch is pinned for development: a CPU wheel of it is available locally, an unpinned one pulls GBs.
	$(PY) -m pip install -q "torch==2.13.0" numpy
	$(PY) -m pip install -q -e ".[dev,local,emulator,build,ray,docs,ui,strategies,pipelines]"
	touch $(STAMP)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The whole project, with the pure core's strict flags (pyproject.toml); then the pure core under --strict
# itself, so a flag that only the whole-program switch sets holds there too.
typecheck: venv
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict vertexdist/spec vertexdist/wire vertexdist/estimate vertexdist/render

# The console's browser tests drive Debian's Chromium through playwright (no browser download).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "== installing chromium (apt) for the console's browser tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# The container tests' private Docker daemon and offline base image need Debian's docker.io and debootstrap;
# installed only as root (the daemon is started only as root: tests/docker_daemon.py).
docker-tools:
	@if [ "$$(id -u)" = 0 ] && ! { command -v dockerd && command -v debootstrap; } >/dev/null 2>&1; then \
	  echo "== installing docker.io and debootstrap (apt) for the container tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap >/dev/null; fi

unit: venv browser docker-tools
	# The container tests' Docker daemon: a private one where none answers and this is root (tests/docker_daemon.py).
	NO_GCE_CHECK=true $(PY) tests/docker_daemon.py -- $(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=30

# The docs site (mkdocs.yml, docs/): strict, so a broken link, anchor or nav entry fails; built into site/.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir site

test: lint typecheck docs unit

demo: venv
	$(VENV)/bin/vertexdist validate job_templates/
	@echo "== the 2 x 4-GPU job as local processes, one CPU worker per replica"
	$(VENV)/bin/vertexdist local-run job_templates/a2-4g-x2.yaml --procs-per-replica 1
	@echo "== day two: that job's outputs, and its chief's log"
	run=$$(ls -td .vertexdist/runs/local-* | head -n 1) && $(VENV)/bin/vertexdist outputs "$$run" \
	  && $(VENV)/bin/vertexdist logs "$$run" --replica workerpool0-0
	@echo "== the same job through the real SDK path, against the local Vertex emulator"
	$(VENV)/bin/vertexdist submit job_templates/a2-4g-x2.yaml --emulator --follow --procs-per-replica 1

bench: venv
	for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done
	# The warm pool's variants (local-run --warm for a script and for torchrun, emulator start --warm), each against
	# torchrun by hand or the SDK in the same script.
	for b in bench_local_run bench_launcher bench_submit; do echo "== bench/$$b.py --warm"; $(PY) bench/$$b.py --warm || exit 1; done

# The process-heavy tests (rank health, launchers, managed jobs, Ctrl-C, the warm pool), STRESS_RUNS times each
# beside a CPU hog that takes one core (tests/stress/stress.py); any failure fails it. Run it before resolving an
# issue that touches processes; its figures are in docs/speed.md.
STRESS_RUNS ?= 10
stress: venv
	$(PY) tests/stress/stress.py --runs $(STRESS_RUNS)

# Issue 44's hold-out hang (not part of `make test`): a 2 replicas x 2 processes job with a rank blocked in its
# data read, 8 times, 3 of them beside a CPU hog; every time all four ranks' stacks must be in their replica's
# log and in the run folder (tests/stress/holdout.py).
holdout: venv
	$(PY) tests/stress/holdout.py --runs 8 --hogged 3

clean:
	rm -rf $(VENV) .vertexdist .pytest_cache .mypy_cache .ruff_cache site
