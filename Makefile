# llm-locust: `make demo` (a distributed run against the built-in simulator) and `make test`;
# `make engine` / `test-engine` / `demo-engine`: the same against a real llama.cpp server (engine/).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install browser proxy prometheus faketime espeak docker docker-base docker-prometheus demo test test-unit test-all lint format bench clean engine test-engine demo-engine

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

browser:  ## Chromium for the report's PNG charts and browser tests (Debian's package; installed when root)
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "chromium not installed: report PNGs and the browser tests will be skipped (apt-get install chromium)"

proxy:  ## tinyproxy, a real HTTP proxy for the proxy tests (Debian's package; installed when root)
	@command -v tinyproxy >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tinyproxy >/dev/null; } || \
	  echo "tinyproxy not installed: the real-proxy test will be skipped (apt-get install tinyproxy)"

prometheus:  ## Prometheus, a real one for the live-export test (Debian's package; installed when root)
	@command -v prometheus >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; } || \
	  echo "prometheus not installed: the real-Prometheus test will be skipped (apt-get install prometheus)"

faketime:  ## faketime, to run workers on skewed clocks for the clock-offset test (Debian's package; installed when root)
	@command -v faketime >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime >/dev/null; } || \
	  echo "faketime not installed: the clock-offset test will be skipped (apt-get install faketime)"

espeak:  ## espeak-ng, to speak the engine tier's speech-to-text clips (Debian's package; installed when root)
	@command -v espeak-ng >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq espeak-ng >/dev/null; } || \
	  echo "espeak-ng not installed: the engine tier's speech-to-text test will be skipped (apt-get install espeak-ng)"

docker:  ## Docker for tests/e2e/test_containers.py: Debian's docker.io, docker-compose, debootstrap installed and the daemon started (when root)
	@missing=""; command -v docker >/dev/null 2>&1 || missing="$$missing docker.io"; \
	  { docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null 2>&1; } || missing="$$missing docker-compose"; \
	  command -v debootstrap >/dev/null 2>&1 || missing="$$missing debootstrap"; \
	  [ -z "$$missing" ] || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; } || \
	  echo "not installed:$$missing (apt-get install$$missing): the container test may be skipped"
	@docker info >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v dockerd >/dev/null 2>&1 && \
	  { (setsid dockerd >/tmp/llm-locust-dockerd.log 2>&1 &); \
	    for i in $$(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done; }; }; \
	  docker info >/dev/null 2>&1 || echo "no Docker daemon (log: /tmp/llm-locust-dockerd.log): the container test will be skipped"

docker-base: docker  ## the stand-in for the official Locust image, built from Debian's packages (cached)
	deploy/docker/build-base.sh

docker-prometheus: docker  ## the stand-in for prom/prometheus (Debian's package), llm-locust/prometheus:bookworm (cached)
	deploy/docker/build-base.sh prometheus

demo: $(STAMP) browser  ## a 1..32-user sweep on the simulator (master + 2 workers, 36 s of load); steps, capacity, curve
	$(BIN)/llm-locust demo

# `make test` in two passes: the tests side by side (JOBS pytest-xdist workers: most of them wait on simulators and
# runs, not on the CPU), then those marked `alone` (timing precision, capacity) one at a time on a quiet machine.
# STAGE=transport: one stage's tests (tests/*/transport*, tests/*/test_transport*); TESTS=path...: those paths.
JOBS  ?= 4
STAGE ?=
TESTS ?= $(if $(STAGE),$(or $(sort $(wildcard tests/*/$(STAGE) tests/*/$(STAGE)* tests/*/test_$(STAGE)*)),$(error \
	STAGE=$(STAGE) names no tests: tests/*/$(STAGE)* and tests/*/test_$(STAGE)* are empty)))
# pytest's exit code 5 is "no test selected": a pass with none of its kind in TESTS is not a failure
PASS   = || { code=$$?; [ $$code = 5 ] || failed=$$code; }

# the two passes over $(1): side by side, then the `alone` tests one at a time; each prints its slowest tests
# (docs/development.md keeps the measure: a test that climbs that list is one to look at)
DURATIONS ?= 30
TWO_PASSES = failed=0; \
	$(BIN)/pytest -n $(JOBS) --dist loadgroup -m 'not slow and not engine and not alone' --durations=$(DURATIONS) \
		$(PYTEST_ARGS) $(1) $(PASS); \
	$(BIN)/pytest -m 'alone and not slow and not engine' --durations=$(DURATIONS) $(PYTEST_ARGS) $(1) $(PASS); \
	exit $$failed

# the tests' processes (pytest's workers, simulators, masters: hundreds) compile the package and the tests once, into
# __pycache__, instead of each on its own (an environment with PYTHONDONTWRITEBYTECODE set: 0.4 s a process, 10.5 s ->
# 5.8 s to collect the suite)
test test-unit test-all test-engine: export PYTHONDONTWRITEBYTECODE :=

test: $(STAMP) browser proxy prometheus faketime  ## the suite CI runs (long runs marked `slow` are skipped); STAGE=, TESTS=
	@$(call TWO_PASSES,$(TESTS))

test-unit: $(STAMP)  ## the unit tests only (tests/unit, side by side, then their `alone` ones): the inner loop, under 2 minutes
	@$(call TWO_PASSES,tests/unit)

test-all: $(STAMP) browser proxy prometheus faketime  ## everything, including the slow runs
	$(BIN)/pytest -m ""

engine:  ## build and cache llama.cpp's server + SmolLM2-135M + its tokenizer (once, ~7 min on 2 cores; $$LLM_LOCUST_ENGINE_DIR)
	bash engine/build.sh

test-engine: $(STAMP) engine espeak  ## the engine tier: the suite's checks against the real llama.cpp server (and faster-whisper-server)
	LLM_LOCUST_ENGINE_REQUIRED=1 $(BIN)/pytest -m engine tests/engine_tier

demo-engine: $(STAMP) engine browser  ## a 1,2,4-user sweep against the real server, ~1 min; prints tok/s and TTFT
	$(BIN)/python -m engine.demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)  ## capacity/accuracy benchmarks (minutes); numbers, not pass/fail
	$(BIN)/python benchmarks/client_capacity.py
	$(BIN)/python benchmarks/trace_capacity.py
	$(BIN)/python benchmarks/sim_throughput.py
	$(BIN)/python benchmarks/sdk_client_cost.py
	$(BIN)/python benchmarks/soak_memory.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
	[ ! -d results ] || find results -mindepth 1 -maxdepth 1 ! -name .gitignore -exec rm -rf {} +
