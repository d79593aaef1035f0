#!/usr/bin/env bash
# The official aclnnCrossEntropyLossGrad sample, unchanged, built with CANN's recipe against `make install`'s
# layout (the g++ line, and CMake with ASCEND_PATH), must print the six documented values; also when its output
# buffer starts out as NaN instead of the answer.
# Usage: check_official_example.sh SOURCE_DIR BUILD_DIR SHIM_LIBRARY
set -euo pipefail
src=$1; build=$2; shim=$3
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null

expect() {  # expect OUTPUT_FILE
    local want=(-0.0091 0.0409 0.0409 -0.0091 0.0409 0.0409)
    local got
    mapfile -t got < <(sed -n 's/^result\[[0-9]*\] is: //p' "$1" | awk '{printf "%.4f\n", $1}')
    if [ "${#got[@]}" -ne 6 ]; then echo "FAIL: expected 6 results, got ${#got[@]}:"; cat "$1"; exit 1; fi
    for i in 0 1 2 3 4 5; do
        if [ "${got[$i]}" != "${want[$i]}" ]; then
            echo "FAIL: result[$i] is ${got[$i]}, expected ${want[$i]}"; cat "$1"; exit 1
        fi
    done
}

# 1. The g++ recipe.
g++ -std=c++11 -I"$prefix/include" -I"$prefix/include/aclnn" "$src/examples/cross_entropy_loss_grad_example.cpp" \
    -L"$prefix/lib64" -lascendcl -lnnopbase -lopapi_math -lopapi_nn -o "$work/sample" 2>"$work/gxx.log" \
    || { cat "$work/gxx.log"; exit 1; }
LD_LIBRARY_PATH="$prefix/lib64" "$work/sample" >"$work/plain.txt"
expect "$work/plain.txt"
echo "g++ recipe: six documented values"

# 2. Output buffer poisoned first: the values must come from the operator.
LD_LIBRARY_PATH="$prefix/lib64" LD_PRELOAD="$shim" "$work/sample" >"$work/poisoned.txt" 2>"$work/poisoned.err"
grep -q "poison-shim: output buffer filled with NaN" "$work/poisoned.err" \
    || { echo "FAIL: the shim did not poison the output buffer"; cat "$work/poisoned.err"; exit 1; }
expect "$work/poisoned.txt"
echo "poisoned output buffer: six documented values"

# 3. The CMake recipe with ASCEND_PATH.
ASCEND_PATH="$prefix" cmake -S "$src/examples/cmake_recipe" -B "$work/cmake" >/dev/null
cmake --build "$work/cmake" --target cross_entropy_loss_grad_example >"$work/cmake.log" 2>&1 \
    || { cat "$work/cmake.log"; exit 1; }
LD_LIBRARY_PATH="$prefix/lib64" "$work/cmake/cross_entropy_loss_grad_example" >"$work/cmake.txt"
expect "$work/cmake.txt"
echo "CMake recipe: six documented values"

# 4. find_package(openaclnn) from the installed CMake package.
mkdir -p "$work/pkg"
cat >"$work/pkg/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.14)
project(pkg_consumer LANGUAGES CXX)
find_package(openaclnn REQUIRED)
add_executable(sample "$src/examples/cross_entropy_loss_grad_example.cpp")
target_link_libraries(sample openaclnn::openaclnn)
CMAKE
cmake -S "$work/pkg" -B "$work/pkg/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/pkg/build" >"$work/pkg.log" 2>&1 || { cat "$work/pkg.log"; exit 1; }
"$work/pkg/build/sample" >"$work/pkg.txt"
expect "$work/pkg.txt"
echo "find_package(openaclnn): six documented values"

