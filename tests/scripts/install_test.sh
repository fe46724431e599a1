#!/usr/bin/env bash
# The installed tree (cmake/SpillwayInstall.cmake): `cmake --install` into a scratch prefix gives
# the launcher, the runtime folder with simgpu, the attention headers and library, and a package
# config; a small consumer builds against it with find_package(spillway) and runs; the installed
# `spillway run` runs a replayed job on the installed simgpu.
# usage: install_test.sh BUILD_DIR OUT_DIR
set -uo pipefail
build=$1
out=$2
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"
prefix="$tmp/prefix"

expect 0 "" -- cmake --install "$build" --prefix "$prefix"
for file in bin/spillway lib/libspillway.so lib/spillway/libspillway.so lib/spillway/spillway-wait \
            lib/spillway/spillway-plan lib/spillway/spillway-replay lib/spillway/simgpu/libcuda.so.1 \
            lib/libspillway_attention.so include/spillway/attention.h include/spillway/attention.hpp \
            lib/cmake/spillway/spillway-config.cmake lib/cmake/spillway/spillwayTargets.cmake; do
  [[ -e "$prefix/$file" ]] || fail "not installed: $file"
done
[[ "$(readlink "$prefix/lib/libspillway.so")" == spillway/libspillway.so ]] ||
  fail "lib/libspillway.so is not a link to spillway/libspillway.so"

# A consumer of the installed package.
mkdir -p "$tmp/consumer"
cat >"$tmp/consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(consumer LANGUAGES CXX)
find_package(spillway 0.1 REQUIRED)
add_executable(consumer main.cc)
target_link_libraries(consumer PRIVATE spillway::attention)
file(WRITE ${CMAKE_BINARY_DIR}/launcher.txt "${SPILLWAY_LAUNCHER}")
CMAKE
cat >"$tmp/consumer/main.cc" <<'CXX'
#include <cstdio>

#include "spillway/attention.h"

int main() {
  size_t bytes = 0;
  // No arguments: refused as a null pointer, whether or not the kernels were built.
  const spillway_attention_status_t status =
      spillway_attention_sdpa_forward_workspace_size(nullptr, &bytes);
  std::printf("kernels %d, no arguments: %s\n", spillway_attention_kernels_available(),
              spillway_attention_status_string(status));
  return status == SPILLWAY_ATTENTION_ERROR_NULL_POINTER ? 0 : 1;
}
CXX
expect 0 "" -- cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$prefix"
expect 0 "" -- cmake --build "$tmp/consumer/build"
expect 0 "no arguments: " -- "$tmp/consumer/build/consumer"
[[ "$(cat "$tmp/consumer/build/launcher.txt" 2>/dev/null)" == "$prefix/bin/spillway" ]] ||
  fail "SPILLWAY_LAUNCHER is not the installed launcher"

# The installed launcher, on the installed simgpu, with a small replayed job.
expect 0 "" -- "$out/replay_make_trace" "$tmp/job.trace" --layers 2 --steps 3
SIMGPU_MEMORY=256MiB expect 0 "verified" -- "$prefix/bin/spillway" run --simgpu \
  --summary "$tmp/summary.json" -- "$prefix/lib/spillway/spillway-replay" "$tmp/job.trace" \
  --steps 2
grep -q '"mode":"run"' "$tmp/summary.json" 2>/dev/null || fail "no summary from the installed run"
grep -q '"errors":\[\]' "$tmp/summary.json" 2>/dev/null || fail "the run's summary has errors"

finish install
