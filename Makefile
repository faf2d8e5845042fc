# The two commands: `make demo` runs the portal, `make test` runs every gate and test.
# Everything else here is a step those two call; each is idempotent.
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -eu -o pipefail -c
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: demo test venv system-deps frontend services-up services-down lint typecheck layers pytest bench bench-report \
        cluster-build cluster-up cluster-down proto gpu-check gpu-check-real lock images oidc-provider soak pytest-realnode realnode-images \
        screenshots settings-docs

include plugin/plugin.mk
include deploy/localcluster/cluster.mk

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q uv==0.13.8

# Reinstalls only when the lock changes.
$(VENV)/.synced: requirements.lock | $(BIN)/python
	VIRTUAL_ENV=$(VENV) $(BIN)/uv pip sync -q requirements.lock
	VIRTUAL_ENV=$(VENV) $(BIN)/uv pip install -q --no-deps -e .
	touch $@

venv: $(VENV)/.synced

lock:
	uv pip compile -q pyproject.toml --extra dev --python-version 3.11 -o requirements.lock

system-deps:
	bash deploy/setup/system-deps.sh

frontend:
	bash deploy/setup/frontend.sh

services-up: system-deps
	bash deploy/setup/services.sh up

services-down:
	bash deploy/setup/services.sh down

lint: venv proto
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy's cache lives beside the Kubernetes build, outside the clone: a fresh clone's first check of
# 570 files takes ~70 s on 2 cores, ~8 s against the cache another clone left. mypy re-checks by
# content hash whatever changed, but the Django plugin's cached links between apps' models name the
# modules the models were in: after a model moves to another module, the old cache reports the old
# module missing. So the cache is kept per set of module paths (content edits reuse it, moves do not),
# the three used last (about 230 MB each).
MYPY_CACHES := $(HOME)/.cache/gpuportal/mypy
MYPY_CACHE := $(MYPY_CACHES)/$(shell git ls-files '*.py' '*.pyi' | sha1sum | cut -c1-12)
typecheck: venv proto
	$(BIN)/mypy --cache-dir $${MYPY_CACHE_DIR:-$(MYPY_CACHE)} .
	if [ -z "$${MYPY_CACHE_DIR:-}" ]; then
	  touch $(MYPY_CACHE)
	  ls -dt $(MYPY_CACHES)/*/ | tail -n +4 | xargs -r rm -rf
	fi

layers: venv
	$(BIN)/lint-imports

define run-pytest
source deploy/setup/services.sh env
bash deploy/setup/services.sh up
$(BIN)/python -m pytest --ignore=tests/realnode --durations=25 $(PYTEST_ARGS)
endef

pytest: venv proto system-deps cluster-build images oidc-provider
	$(run-pytest)

# The tests on the optional real node (a real kubelet, containerd and runc; deploy/localcluster/README.md)
# run inside the run's own network namespace, with their own control plane, Postgres and Redis there.
REALNODE_RUN := $(BIN)/python -m deploy.localcluster.netns run -- bash deploy/localcluster/realnode/run-tests.sh
pytest-realnode: venv proto system-deps cluster-build realnode-images images
	$(REALNODE_RUN) $(PYTEST_ARGS)

# The real node's pause and busybox images, and the stand-ins for the chart's Postgres and Redis
# (cached; seconds when built, about 3 min cold). Built out here: nothing routes out of the run's
# namespace, and the builds need apt, mmdebstrap and the Go toolchain.
realnode-images: system-deps cluster-build
	bash deploy/localcluster/realnode/images.sh >/dev/null
	bash deploy/localcluster/realnode/store-images.sh >/dev/null

# The OpenID Connect provider the sign-in tests run (Go, cached; seconds when nothing changed).
oidc-provider:
	bash deploy/setup/oidc-provider.sh >/dev/null

# The portal and node OCI images (no Docker engine), cached in ~/.cache/gpuportal/images/: seconds when
# nothing changed. tests/images runs them.
images: venv proto system-deps
	bash deploy/images/build.sh

# The real-node run (~2 min, mostly waiting on containers; ~0.4 of a core) shares nothing with the main
# suite but the machine, so it runs beside it, in its own process group (`set -m`, which also keeps
# SIGINT working there); its output follows the suite's. Ctrl-C is passed on to it as SIGINT, on which
# its pytest tears the real node down and puts the host back as found (SIGTERM would leave the kubelet,
# containerd and the host's changes behind).
test: lint typecheck layers venv proto system-deps cluster-build images oidc-provider realnode-images
	realnode_log=$$(mktemp /tmp/gpuportal-realnode.XXXXXX)
	set -m
	$(REALNODE_RUN) $(PYTEST_ARGS) >"$$realnode_log" 2>&1 &
	realnode=$$!
	set +m
	trap 'rm -f "$$realnode_log"' EXIT
	trap 'kill -INT -- -$$realnode 2>/dev/null || true; wait $$realnode || true; cat "$$realnode_log"; exit 130' INT TERM
	suite=0; ( $(run-pytest) ) || suite=$$?
	real=0; wait $$realnode || real=$$?
	trap - INT TERM
	echo "==== the real-node run (tests/realnode), beside the suite above: exit $$real ===="
	cat "$$realnode_log"
	exit $$(( suite || real ))

# The drills and model checks at the full size of docs/reliability.md (hours, not in `make test`):
# worker kills 200 jobs / 50 kills / 5 seeds, the lifecycle model check 500 x 50, outages of Postgres
# and Redis 5 min and of the API server 10 min, the API fuzz 60 examples per operation and mode and
# 100 stateful scenarios of 12 steps, the kubelet absent 60 s, the load test 200 users for 10 min
# (the per-test timeout of `make test` is lifted: one drill alone takes longer).
SOAK_TESTS ?= tests/workloads_e2e/test_outage_drills.py tests/workloads_e2e/test_chaos_worker_kill.py \
              plugin/tests/test_resilience.py workloads/tests/test_lifecycle_model_check.py workloads/tests/test_vanishing_evidence_model_check.py \
              tests/security/test_api_fuzz.py tests/workloads_e2e/test_load.py tests/workloads_e2e/test_gang_pressure.py
soak: venv proto system-deps cluster-build images
	source deploy/setup/services.sh env
	bash deploy/setup/services.sh up
	GPUPORTAL_SOAK=1 GPUPORTAL_LIFECYCLE_EXAMPLES=500 GPUPORTAL_LIFECYCLE_STEPS=50 \
	  $(BIN)/python -m pytest -s --timeout=14400 $(SOAK_TESTS) $(PYTEST_ARGS)

# The guides' screenshots, retaken into docs/img/ by the browser tests that take them. A plain test run
# writes them into .run/shots/ instead and leaves the clone as it found it.
SHOT_TESTS := tests/oidc/test_oidc_browser.py tests/gpu_e2e/test_cluster_map_browser.py \
              tests/workloads_e2e/test_browser_idle.py tests/workloads_e2e/test_browser_rightsizing.py \
              tests/workloads_e2e/test_browser_templates.py tests/browser/test_home_browser.py
screenshots: venv proto system-deps cluster-build images oidc-provider
	source deploy/setup/services.sh env
	bash deploy/setup/services.sh up
	GPUPORTAL_SHOTS_DIR=$(CURDIR)/docs/img $(BIN)/python -m pytest $(SHOT_TESTS) $(PYTEST_ARGS)

# The operator guide's settings tables, written from portal/settings/environment.py and plugin/environment.py
# (tests/test_environment.py fails while they differ).
settings-docs: venv proto
	$(BIN)/python -m portal.settings.reference

# REAL_NODE=1: also a real node running real containers (deploy/localcluster/README.md); the demo then
# runs inside the run's own network namespace, and the host's 127.0.0.1:8000 is forwarded into it.
demo: venv proto frontend cluster-build $(if $(REAL_NODE),realnode-images)
	$(if $(REAL_NODE),$(BIN)/python -m deploy.localcluster.netns run --forward $${PORT:-8000} --) \
	  $(BIN)/python manage.py demo $(if $(REAL_NODE),--real-node)

bench: venv proto cluster-build
	$(BIN)/python -m bench --profile ci

# Cost against size (bench/report.py): the full profile at three sizes (hours) and the ci profile, each
# saved in docs/benchmarks/ after a header line (date, machine, commit), then README.md and a PNG chart
# per multi-size benchmark drawn from them. RESULTS="<saved .jsonl files>" skips the runs, only redraws.
# A run writes to .partial first, so one that fails hours in keeps the last good results (and its own).
BENCH_DOCS := docs/benchmarks
bench-report: venv $(if $(RESULTS),,proto cluster-build)
	if [ -z "$(RESULTS)" ]; then
	  mkdir -p $(BENCH_DOCS)
	  { $(BIN)/python -m bench.report --header; $(BIN)/python -m bench --profile full --sizes; } \
	    > $(BENCH_DOCS)/results-full.jsonl.partial
	  mv $(BENCH_DOCS)/results-full.jsonl.partial $(BENCH_DOCS)/results-full.jsonl
	  { $(BIN)/python -m bench.report --header; $(BIN)/python -m bench --profile ci; } \
	    > $(BENCH_DOCS)/results-ci.jsonl.partial
	  mv $(BENCH_DOCS)/results-ci.jsonl.partial $(BENCH_DOCS)/results-ci.jsonl
	fi
	$(BIN)/python -m bench.report --out $(BENCH_DOCS) \
	  $(or $(RESULTS),$(BENCH_DOCS)/results-full.jsonl $(BENCH_DOCS)/results-ci.jsonl)
