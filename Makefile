# graphdump: the two set-up commands are `make demo` and `make test` (see README.md).
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# The project's Python environment (scripts/venv): torch==2.13.0 and the test packages, pinned
# in python/requirements-dev.txt. Every build, test, demo and bench uses its Python.
VENV ?= $(CURDIR)/.venv
PYTHON := $(VENV)/bin/python
# ccache, where installed (scripts/install-deps installs it), keeps the torch-heavy objects of
# earlier builds, shared between checkouts (paths are hashed relative to the checkout).
LAUNCHER := $(if $(shell command -v ccache),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1
# The torch units' precompiled header (src/torch/CMakeLists.txt) is cached too.
export CCACHE_SLOPPINESS ?= pch_defines,time_macros,include_file_mtime,include_file_ctime
CONFIGURE = cmake -S . -G Ninja -DGRAPHDUMP_PYTHON=$(PYTHON) $(LAUNCHER)

.PHONY: all deps venv build install test test-unit test-sanitize fuzz-build fuzz demo bench clean format

all: build

deps:
	@scripts/install-deps
	@scripts/venv $(VENV)

$(BUILD)/build.ninja: CMakeLists.txt | deps
	$(CONFIGURE) -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# graphdump and graphdump-torch into $(PREFIX)/bin, the Python package into
# $(PREFIX)/lib/python3.N/site-packages; DESTDIR stages it. To install into your own Python
# environment, use pip instead (docs/README.md, "Install").
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# Every test: unit tests, NumPy checks and end-to-end runs, then under AddressSanitizer and
# UndefinedBehaviorSanitizer: the core and analysis tests, each fuzzer for a few seconds from
# its seed corpus (clang, in $(FUZZ_BUILD)), and a small run and train of the LibTorch host
# (GCC, which LibTorch's headers need, in $(ASAN_BUILD)). Each sanitizer build builds only
# what its tests run.
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) --no-print-directory test-sanitize

test-sanitize: fuzz-build
	cd $(FUZZ_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) \
	  -R '^(core_tests|analysis_tests|core_stats_sse2|fuzz_.*)$$'
	$(CONFIGURE) -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DGRAPHDUMP_SANITIZE=ON \
	  -DGRAPHDUMP_WITH_TORCH=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target graphdump-torch
	cd $(ASAN_BUILD) && ctest --output-on-failure -R '^torch_sanitize$$'

# The clang build with ASan, UBSan and libFuzzer coverage: core and analysis tests, fuzzers.
fuzz-build: deps
	$(CONFIGURE) -B $(FUZZ_BUILD) -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
	  -DGRAPHDUMP_SANITIZE=ON -DGRAPHDUMP_FUZZ=ON -DGRAPHDUMP_WITH_TORCH=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target core_tests analysis_tests fuzzers

# Fuzzes every target for FUZZ_SECONDS (default 60), growing $(FUZZ_BUILD)/fuzz-corpus/<name>
# from tests/fuzz/corpus/<name>; a crash or a hang is saved in $(FUZZ_BUILD)/fuzz-findings/
# and fails the target after the others have run. Example: make fuzz FUZZ_SECONDS=3600
fuzz: fuzz-build
	@failed=""; for binary in $(FUZZ_BUILD)/tests/fuzz/fuzz_*; do \
	  name=$${binary##*/fuzz_}; \
	  mkdir -p $(FUZZ_BUILD)/fuzz-corpus/$$name $(FUZZ_BUILD)/fuzz-findings/$$name; \
	  echo "fuzz $$name: $(FUZZ_SECONDS) s"; \
	  $$binary -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	    -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/fuzz-findings/$$name/ \
	    $(FUZZ_BUILD)/fuzz-corpus/$$name tests/fuzz/corpus/$$name \
	    > $(FUZZ_BUILD)/fuzz-findings/$$name.log 2>&1 || failed="$$failed $$name"; \
	  grep -E '^stat::number_of_executed_units|^Done' $(FUZZ_BUILD)/fuzz-findings/$$name.log; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: findings in:$$failed (see $(FUZZ_BUILD)/fuzz-findings)"; exit 1; fi

demo: build
	PYTHON=$(PYTHON) scripts/demo $(BUILD)

bench: deps
	$(CONFIGURE) -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRAPHDUMP_BUILD_BENCH=ON
	cmake --build $(BUILD) -j $(JOBS)
	PYTHON=$(PYTHON) scripts/bench $(BUILD)

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)  # the environment .venv stays
