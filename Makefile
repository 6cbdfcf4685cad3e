# partrain's two entry points on a fresh Debian 12 machine:
#   make demo   install what is missing, build, train a traced 4-rank GPT, export its trace, run
#               a 4-rank collective benchmark, analyse the run
#   make test   install what is missing, build, run the whole test suite (CTest), with the real
#               clients the tests drive: Slurm, munge and Open MPI from Debian, and torch with HTA
#               in a virtual environment under $(PARTRAIN_CACHE) (docs/testing.md)
# Everything else (deps, configure, build) is a step of those two. To install what was built:
#   make install PREFIX=~/.local   bin/partrain, lib/libpartrain_inject.so, share/partrain (presets,
#                                  Python module), the man page, bash and zsh completions, the docs
# For a machine with a GPU:
#   make gpu-bundle  build/partrain-gpu-bundle.tar.gz to carry there; its gpu-validate.sh runs
#                    every GPU test and benchmark (docs/gpu-validation.md)

BUILD_DIR ?= build
PARTRAIN_CUDA ?= AUTO
JOBS ?= $(shell nproc)
CTEST_ARGS ?=
# Line tables only (-g1): backtraces, perf and gdb still show file:line; full -g doubled the compile
# time of some library files (docs/decisions.md). For gdb with variables: CXX_FLAGS_RELWITHDEBINFO=
# "-O2 -g -DNDEBUG" on a fresh BUILD_DIR, or configure with -DCMAKE_BUILD_TYPE=Debug.
CXX_FLAGS_RELWITHDEBINFO ?= -O2 -g1 -DNDEBUG

DEB_PACKAGES := cmake g++ ninja-build pkg-config python3 \
  libcli11-dev libfmt-dev libsqlite3-dev libncurses-dev libgloo-dev libopenblas-dev \
  nlohmann-json3-dev zlib1g-dev libgtest-dev libgmock-dev clang libclang-rt-14-dev tmux \
  patchelf

# The tests of real clients (docs/testing.md). The cluster tests start these engines themselves
# (tests/integration/cluster_*: Slurm's daemons with munge, mpirun, PMIx's library for rank 0's
# host; ip and unshare for their nodes' namespaces); PARTRAIN_SKIP_CLUSTER=1 installs none.
CLUSTER_DEB_PACKAGES := slurm-wlm munge openmpi-bin libpmix2 iproute2
# The metrics endpoint's test scrapes a run with curl and parses the pages with Prometheus' own
# Python client (tests/integration/metrics_endpoint_test.cpp); PARTRAIN_SKIP_METRICS_CLIENTS=1
# installs neither. locales: the sources of the Turkish locale a unit test builds (dotless i:
# header names read under the dashboard's LC_CTYPE, tests/unit/metrics/http_request_test.cpp).
METRICS_DEB_PACKAGES := curl python3-prometheus-client locales
# The torch tests' interpreter: PyPI's default wheels of these versions in a virtual environment
# kept across runs and checkouts; PARTRAIN_SKIP_TORCH=1 installs nothing.
TORCH_VERSION := 2.15.0
HTA_VERSION := 0.5.0
PARTRAIN_CACHE ?= $(HOME)/.cache/partrain
TORCH_VENV := $(PARTRAIN_CACHE)/venv-torch$(TORCH_VERSION)-hta$(HTA_VERSION)
TORCH_PYTHON_FILE := $(BUILD_DIR)/torch-python

PREFIX ?= /usr/local

.PHONY: all deps test-deps configure build install demo test clean gpu-bundle gpu-validate

all: build

deps:
	@./scripts/install-deps.sh $(DEB_PACKAGES)

# The interpreter's path (empty when the install was skipped) goes to CMake and to ctest, whose
# torch tests skip in one line without it.
test-deps: configure
	@./scripts/install-deps.sh --for "the cluster tests (Slurm, Open MPI)" \
	  --skip PARTRAIN_SKIP_CLUSTER $(CLUSTER_DEB_PACKAGES)
	@./scripts/install-deps.sh --for "the metrics endpoint's test (curl, Prometheus' parser)" \
	  --skip PARTRAIN_SKIP_METRICS_CLIENTS $(METRICS_DEB_PACKAGES)
	@./scripts/install-deps.sh --for "the torch tests' virtual environment" \
	  --skip PARTRAIN_SKIP_TORCH python3-venv
	@./scripts/install-torch-venv.sh $(TORCH_VENV) torch==$(TORCH_VERSION) \
	  HolisticTraceAnalysis==$(HTA_VERSION) >$(TORCH_PYTHON_FILE)
	@cmake -S . -B $(BUILD_DIR) -DPARTRAIN_TORCH_PYTHON="$$(cat $(TORCH_PYTHON_FILE))" >/dev/null

$(BUILD_DIR)/build.ninja: CMakeLists.txt | deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(CXX_FLAGS_RELWITHDEBINFO)" -DPARTRAIN_CUDA=$(PARTRAIN_CUDA)

configure: deps $(BUILD_DIR)/build.ninja

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# CMake's install rules (DESTDIR= for a staging root); an installed partrain finds its injection
# library and share/partrain relative to its own location, so the prefix may move.
install: build
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)
	@echo "partrain installed under $(PREFIX): add $(PREFIX)/bin to PATH; man partrain;" \
	  "completions in $(PREFIX)/share/bash-completion and $(PREFIX)/share/zsh/site-functions"

DEMO_TRACE := $(BUILD_DIR)/demo.db

demo: build
	@echo "== partrain launch: GPT (4 layers, hidden 256, 8 heads, seq 128) on 4 ranks, dp 2 x tp 2, traced =="
	rm -f $(DEMO_TRACE) $(DEMO_TRACE)-wal $(DEMO_TRACE)-shm
	$(BUILD_DIR)/bin/partrain launch -n 4 --workload gpt --dp 2 --tp 2 --micro-batch 2 --steps 12 --trace $(DEMO_TRACE)
	$(BUILD_DIR)/bin/partrain export --format chrome --force $(DEMO_TRACE) -o $(BUILD_DIR)/demo.json
	@echo "open $(BUILD_DIR)/demo.json in https://ui.perfetto.dev or chrome://tracing"
	@echo "== partrain bench collectives: 4 ranks, Gloo over loopback =="
	$(BUILD_DIR)/bin/partrain bench collectives -n 4 -b 1K -e 16M -f 4 --op all_reduce
	@echo "== partrain analyze: where the demo run's time went, and what to try =="
	$(BUILD_DIR)/bin/partrain analyze $(DEMO_TRACE)
	@echo "== next: $(BUILD_DIR)/bin/partrain top $(DEMO_TRACE) (the dashboard), launch --config" \
	  "examples/workloads/gpt-dp2-tp2.toml, make install PREFIX=~/.local; README: After the demo =="

test: build test-deps
	PARTRAIN_TORCH_PYTHON="$$(cat $(TORCH_PYTHON_FILE))" \
	  ctest --test-dir $(BUILD_DIR) --output-on-failure -LE "long|soak" -j 2 $(CTEST_ARGS)

clean:
	rm -rf $(BUILD_DIR)

# Only what the bundle holds is built: partrain, its injection library, the GPU test executables.
gpu-bundle: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target gpu-bundle

# The same checks from this build tree (exit 4 where no GPU is visible: nothing was validated).
gpu-validate: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target gpu-validate
