# Every target installs what it needs: a virtualenv in .venv (keyed on
# pyproject.toml) and the Go-built testbed binaries in ~/.cache/model-serving-addon.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)
ARGS ?=

# Python keeps what it compiles (__pycache__, which git ignores), whatever the calling shell
# says: with PYTHONDONTWRITEBYTECODE set, every pytest worker compiled the harness and rewrote
# every test file's assertions again on each run (collecting the suite took 8.5 CPU-seconds a
# process instead of 3.5; `make test` has four), as did each harness process.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: all venv binaries browser bundles crds chart-docs olm-bundle console lint unit test soak demo bench image image-test release clean

all: test

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

venv: $(STAMP)

binaries: venv
	$(BIN)/python -m testbed build

# Debian's Chromium for the console's browser tests (apt, as root), installed before the tests
# start so that no test's time goes to it (testbed/browser.py).
browser: venv
	$(BIN)/python -m testbed.browser

bundles: venv
	$(BIN)/python -m addon_agent.bundle_render --cache $(HOME)/.cache/model-serving-addon/bundles

crds: venv
	$(BIN)/model-serving-addon crds
	$(BIN)/python -m addon_cli.troubleshooting

# The chart's README from the comments of its values.yaml (helm-docs, built by `binaries`).
chart-docs: binaries
	$(BIN)/python -m testbed.chart docs

# The add-on as an OLM bundle (docs/olm.md) in $(OLM_OUT)/bundle, and in
# $(OLM_OUT)/hub-objects.yaml what OLM cannot install: made from the chart by the testbed's
# helm, then checked by operator-framework's validators (operator-verify; exit 1 on an error).
OLM_OUT ?= dist/olm
olm-bundle: venv
	$(BIN)/python -m testbed build helm operator-framework
	$(BIN)/python -m testbed.olm --out $(OLM_OUT) --verify

# The fleet console's page (addon_cli/console/web: React and PatternFly from the npm registry,
# built by Vite) into addon_cli/console/static, which `model-serving-addon console` serves.
# The console's tests build it themselves when it is missing or older than its sources.
console:
	cd addon_cli/console/web && npm ci --no-audit --no-fund && npm run build

lint: venv
	$(BIN)/ruff check model_serving_addon addon_api addon_manager addon_agent addon_cli testbed tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

# Every test that needs only Python: no Go, no built binaries, no network. A test that needs
# more requests a fixture of tests/conftest.py (testbed, built_binaries, go_modules, bundles),
# which marks it `testbed`.
unit: venv
	$(BIN)/pytest -q -m "not testbed" tests $(ARGS)

# Everything but the image tests (tests/image: `make image-test`), in PYTEST_WORKERS parallel
# workers (pytest-xdist): the tests on each shared testbed run on one worker in file order,
# every other file (its own fleet, or pure Python) is a unit another worker can take
# (tests/conftest.py: _worker_group).
# Three: on this machine (2026-12-07, thirteenth session) the suite is CPU-bound throughout, and
# a fourth worker only adds contention: with four, 1,953 passed in 16 min 8 s of pytest and the
# machine's processes used 1,781 CPU-seconds; with three, on the same commit right after, in
# 14 min 31 s and 1,481 CPU-seconds (every wait is longer under contention, and every fleet
# polls through it). On the tenth session's machine four had been a minute faster than three
# (10 min 10 s to 11 min 3 s against 11 min 39 s); five saturated it. README timing note, issue 31.
PYTEST_WORKERS ?= 3
test: venv binaries browser lint
	$(BIN)/pytest -q --durations=10 -n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder -m "not image" tests $(ARGS)

# Long variants of tests/reliability (more rounds, more kills, issue 8's sizes), not part of
# `make test`; -s shows what each run measured. RELIABILITY_SEED=<n> replays a run.
soak: venv binaries
	RELIABILITY_SCALE=soak $(BIN)/pytest -q -s tests/reliability $(ARGS)

demo: venv binaries
	$(BIN)/python -m testbed demo $(ARGS)

# Benchmarks against OCM's ManifestWorkReplicaSet and a tight client (not part of `make test`).
bench: venv binaries
	$(BIN)/python -m bench.fanout --sizes 100,300,1000,3000
	$(BIN)/python -m bench.steady --clusters 1000,3000 --intents 10 --seconds 120
	$(BIN)/python -m bench.status --clusters 1000 --intents 3

# The container image (not part of `make test`): podman builds the Containerfile, then runs the
# image once (the CLI's help and the shipped kustomize's version). LOCAL_BASES=1 replaces the
# public bases by Debian roots made with mmdebstrap (scripts/local-image-bases.sh);
# PODMAN_FLAGS go to both `podman build` and `podman run`. In a sandbox with cgroups v1,
# capped rlimits and a TLS-intercepting egress proxy:
#   make image LOCAL_BASES=1 PODMAN_FLAGS="--runtime runc --ulimit nofile=1024:1024 \
#     --ulimit nproc=1024:1024 -v /etc/ssl/certs:/etc/ssl/certs:ro"
IMAGE ?= localhost/model-serving-addon:dev
PODMAN ?= podman
PODMAN_FLAGS ?=
LOCAL_BASES ?=

image:
	bases=$(if $(filter 1,$(LOCAL_BASES)),$$(PODMAN=$(PODMAN) scripts/local-image-bases.sh)) \
	  && $(PODMAN) build $(PODMAN_FLAGS) $$bases -t $(IMAGE) -f Containerfile .
	$(PODMAN) run --rm $(PODMAN_FLAGS) $(IMAGE) --help
	$(PODMAN) run --rm $(PODMAN_FLAGS) --entrypoint kustomize $(IMAGE) version

# The manager and one agent from the image against the testbed (tests/image; not part of
# `make test`). Builds the image first (cached layers when the code has not changed); takes
# the same variables as `make image`, and PODMAN_FLAGS go to the test's `podman run` too.
image-test: venv binaries image
	IMAGE=$(IMAGE) PODMAN=$(PODMAN) PODMAN_FLAGS="$(PODMAN_FLAGS)" \
	  $(BIN)/pytest -q -s --durations=10 -m image tests/image $(ARGS)

# A release (docs/operations.md, "Release"): the image (make image) pushed with podman to
# $(REGISTRY)/model-serving-addon:<version>, then the chart, pinned to the digest the registry
# gave (image.digest), packaged by helm and pushed to oci://$(REGISTRY)/charts; both at the
# chart's version, which must equal appVersion and the Python package's. Written to dist/.
# SOURCE: the project's https:// address, written into the packaged chart's home and sources.
# RELEASE_FLAGS: --plain-http for a registry without TLS.
REGISTRY ?=
SOURCE ?=
RELEASE_FLAGS ?=
ifneq ($(filter release,$(MAKECMDGOALS)),)
ifeq ($(REGISTRY),)
$(error make release needs REGISTRY=host[:port]/path)
endif
ifeq ($(SOURCE),)
$(error make release needs SOURCE=https://... (the chart's home and sources))
endif
endif
release: venv image
	$(BIN)/python -m testbed build helm
	$(BIN)/python -m testbed.release --registry $(REGISTRY) --source $(SOURCE) --image $(IMAGE) \
	  --podman "$(PODMAN)" $(RELEASE_FLAGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .import_linter_cache
