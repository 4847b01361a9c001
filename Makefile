# graphdump: the two set-up commands are `make demo` and `make test` (see README.md).
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
PYTHON ?= /usr/bin/python3

.PHONY: all deps build test test-unit test-sanitize demo bench clean format

all: build

deps:
	@scripts/install-deps

$(BUILD)/build.ninja: CMakeLists.txt | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Every test: unit tests, NumPy checks and end-to-end runs, then the core and analysis tests
# again under AddressSanitizer and UndefinedBehaviorSanitizer.
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) --no-print-directory test-sanitize

test-sanitize: deps
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGRAPHDUMP_SANITIZE=ON \
	  -DGRAPHDUMP_WITH_TORCH=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target core_tests analysis_tests
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -R '^(core_tests|analysis_tests|core_stats_sse2)$$'

demo: build
	scripts/demo $(BUILD)

bench: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRAPHDUMP_BUILD_BENCH=ON
	cmake --build $(BUILD) -j $(JOBS)
	scripts/bench $(BUILD)

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
