#!/usr/bin/env bash
# Configures and builds spillway into a build folder: build/ (default) or build-sanitize/ with
# --sanitize (AddressSanitizer + UndefinedBehaviorSanitizer) or build-tsan/ with --tsan
# (ThreadSanitizer). Prints the folder on its last line.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

dir="$root/build"
args=()
if [[ "${1:-}" == "--sanitize" ]]; then
  dir="$root/build-sanitize"
  # The sanitizers cover host code; the CUDA kernels are built (and timed) by the plain leg.
  # The benchmarks are timed by the plain leg; none of the tests runs them.
  args+=(-DSPILLWAY_SANITIZE=ON -DSPILLWAY_ENABLE_CUDA=OFF -DSPILLWAY_BUILD_BENCHMARKS=OFF)
elif [[ "${1:-}" == "--tsan" ]]; then
  dir="$root/build-tsan"
  args+=(-DSPILLWAY_TSAN=ON -DSPILLWAY_ENABLE_CUDA=OFF -DSPILLWAY_BUILD_BENCHMARKS=OFF)
fi
"$root/scripts/setup.sh" >&2
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ ! -f "$dir/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${args[@]}" >&2
fi
cmake --build "$dir" -j "$(nproc)" >&2
echo "$dir"
