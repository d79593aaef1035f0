# Thin wrapper over CMake. `make run` and `make test` work on a fresh Debian machine: they install what is missing.
BUILD ?= build
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local
CMAKE_FLAGS ?=

.PHONY: all deps deps-test build run test install bench clean

all: build

deps:
	@bash scripts/install-deps.sh build

deps-test:
	@bash scripts/install-deps.sh test

# WITH_TESTS=ON also builds the tests and benchmarks (they need the packages of deps-test).
WITH_TESTS ?= ON

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DOPENACLNN_BUILD_TESTS=$(WITH_TESTS) \
	    -DOPENACLNN_BUILD_BENCH=$(WITH_TESTS) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

# Builds Release and runs the official example of aclnnCrossEntropyLossGrad.
run: deps
	$(MAKE) build WITH_TESTS=OFF
	$(MAKE) -C examples run BUILD=$(abspath $(BUILD))

# The whole test suite through ctest.
test: deps-test
	$(MAKE) build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 1200

install: deps
	$(MAKE) build WITH_TESTS=OFF
	cmake --install $(BUILD) --prefix $(PREFIX)

# Builds Release and runs the gradient benchmark: every shape, dtype and variant against a copy of the same bytes
# in the same run (x_copy), medians of BENCH_REPS runs. BENCH_FILTER selects rows (a regex), e.g. 4096x32000.
BENCH_REPS ?= 3
BENCH_FILTER ?= .
# The forward's benchmark (aclnnCrossEntropyLoss, x_copy target <= 1.3 for fp32 4096 x 32000): rows like N:4096/C:32000.
FORWARD_BENCH_FILTER ?= .
bench: deps-test
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DOPENACLNN_BUILD_BENCH=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS) --target grad_bench
	$(BUILD)/bench/grad_bench --benchmark_filter='$(BENCH_FILTER)' --benchmark_repetitions=$(BENCH_REPS) \
	    --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true
	cmake --build $(BUILD) -j $(JOBS) --target forward_bench
	$(BUILD)/bench/forward_bench --benchmark_filter='$(FORWARD_BENCH_FILTER)' --benchmark_repetitions=$(BENCH_REPS) \
	    --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true

# ---- Hardening: sanitizers, fuzzing, large tensors (CMakePresets.json; each in its own build directory) ----
# test-asan: the whole suite under AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer at each exit).
# test-tsan: the whole suite under ThreadSanitizer (clang + libomp + archer, see CMakePresets.json).
# Both leave out label `nosan` (tests that run an uninstrumented program against the libraries: the official sample
# built with CANN's g++ recipe, Python through ctypes) and `large`; test-tsan also `notsan` (each says why).
.PHONY: test-asan test-tsan fuzz test-large
FUZZ_SECONDS ?= 60
test-asan: deps-test
	cmake --preset asan $(CMAKE_FLAGS)
	cmake --build --preset asan -j $(JOBS)
	ctest --preset asan -j $(JOBS)

test-tsan: deps-test
	cmake --preset tsan $(CMAKE_FLAGS)
	cmake --build --preset tsan -j $(JOBS)
	ctest --preset tsan -j $(JOBS)

# Every libFuzzer target for FUZZ_SECONDS seconds each, from the seed corpus in fuzz/corpus/.
fuzz: deps-test
	cmake --preset fuzz $(CMAKE_FLAGS)
	cmake --build --preset fuzz -j $(JOBS)
	bash fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

# The 64-bit Arm build, cross-compiled (CMakePresets.json, preset arm64), its tests run under user-mode QEMU: the
# kernel suite on every Arm kernel and the operator against the float64 reference at each ISA cap, with QEMU's
# default SVE vector length (512 bits); the operator's output bits against the native build's (tests/arm64/
# same_bits.sh); then the kernel suite's SVE and SVE2 cases and the bitwise comparison of every kernel again at 128
# and 2048 bits (SVE code does not know its vector length until it runs).
.PHONY: test-arm64
ARM64_QEMU ?= qemu-aarch64 -L /usr/aarch64-linux-gnu
test-arm64: deps-test
	@bash scripts/install-deps.sh arm64
	$(MAKE) build
	cmake --preset arm64 $(CMAKE_FLAGS)
	cmake --build --preset arm64 -j $(JOBS)
	ctest --preset arm64 -j $(JOBS)
	bash tests/arm64/same_bits.sh $(BUILD) build-arm64 $(ARM64_QEMU)
	for bytes in 16 256; do \
	    echo "== SVE vector length $$((bytes * 8)) bits"; \
	    OMP_NUM_THREADS=1 $(ARM64_QEMU) -cpu max,sve-default-vector-length=$$bytes build-arm64/tests/kernels/grad_kernel_test \
	        --gtest_brief=1 --gtest_filter='AllKernels/*SVE*:GradKernelEvery16BitInput.*:GradKernelScaledExp.*:GradKernelDeterminism.AcrossIsasOnOneThread:-*StreamingStores*' || exit 1; \
	done

# Tensors above 2^31 elements (label `large`: about 9 GB of memory and a minute or two), in the Release build.
test-large: deps-test
	$(MAKE) build
	cd $(BUILD) && ctest --output-on-failure -L large --timeout 3600

clean:
	rm -rf $(BUILD)
