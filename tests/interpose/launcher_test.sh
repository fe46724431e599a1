#!/usr/bin/env bash
# Tests of the `spillway` launcher in build/out: help and version texts, usage errors (exit 2),
# and the environment `spillway run` hands to the command (LD_PRELOAD kept and extended).
# usage: launcher_test.sh OUT_DIR
set -uo pipefail
out=$(cd "$1" && pwd)
spillway="$out/spillway"
failures=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect RC PATTERN -- COMMAND...: runs COMMAND, checks its status and that stdout+stderr match.
expect() {
  local want_rc=$1 pattern=$2
  shift 3
  local got_rc=0
  "$@" >"$tmp/out" 2>&1 || got_rc=$?
  if [[ $got_rc -ne $want_rc ]]; then
    fail "$* -> exit $got_rc, want $want_rc; output: $(head -c 400 "$tmp/out")"
  elif [[ -n "$pattern" ]] && ! grep -Eq -- "$pattern" "$tmp/out"; then
    fail "$* -> output lacks /$pattern/: $(head -c 400 "$tmp/out")"
  fi
}

expect 0 '^usage: spillway' -- "$spillway" --help
expect 0 '^spillway [0-9]+\.[0-9]+' -- "$spillway" --version
expect 0 '^usage: spillway run' -- "$spillway" run --help
expect 0 '^spillway [0-9]+\.[0-9]+' -- "$spillway" run --version
expect 0 '^usage: spillway doctor' -- "$spillway" doctor --help
expect 0 '^spillway [0-9]+\.[0-9]+' -- "$spillway" doctor --version
expect 2 'spillway: missing command' -- "$spillway"
expect 2 'unknown command .frobnicate.' -- "$spillway" frobnicate
expect 2 '^spillway: run: missing command to run' -- "$spillway" run
expect 2 'usage: spillway run' -- "$spillway" run --summary /tmp/x
expect 2 "^spillway: run: unknown option '--bogus'" -- "$spillway" run --bogus -- true
expect 2 "^spillway: run: bad --mode 'turbo'" -- "$spillway" run --mode turbo -- true
expect 2 "^spillway: run: bad --log 'loud'" -- "$spillway" run --log loud -- true
expect 2 "^spillway: run: bad --device-memory '3GX'" -- "$spillway" run --device-memory 3GX true
expect 2 "^spillway: doctor: unknown option '--frob'" -- "$spillway" doctor --frob
expect 1 '' -- "$spillway" run -- false

# The environment the command sees. The user's own LD_PRELOAD (plus whatever the test runner
# preloads, e.g. the sanitizer runtimes) stays in front.
user_preload="${LD_PRELOAD:+$LD_PRELOAD:}$out/libspillway_noop_kernels.so"
LD_PRELOAD="$user_preload" PYTORCH_CUDA_ALLOC_CONF=mine \
  "$spillway" run --summary "$tmp/s.json" --mode record --log debug --log-file "$tmp/log" \
  --device-memory 8GiB -- env >"$tmp/env" 2>"$tmp/err" || fail "spillway run -- env failed: $(cat "$tmp/err")"
for line in "LD_PRELOAD=$user_preload:$out/libspillway.so" "SPILLWAY_SUMMARY=$tmp/s.json" \
            "SPILLWAY_MODE=record" "SPILLWAY_LOG=debug" "SPILLWAY_LOG_FILE=$tmp/log" \
            "SPILLWAY_DEVICE_MEMORY=8GiB" "PYTORCH_CUDA_ALLOC_CONF=mine" \
            "TF_GPU_ALLOCATOR=cuda_malloc_async" "XLA_PYTHON_CLIENT_PREALLOCATE=false"; do
  grep -qxF -- "$line" "$tmp/env" || fail "spillway run -- env: missing '$line'"
done
# env made no CUDA call, but no summary existed yet: it writes an all-zero one.
grep -q '"mode":"record"' "$tmp/s.json" 2>/dev/null || fail "no summary from spillway run -- env"

# Without --: the command starts at the first non-option; with no LD_PRELOAD of the user's, ours
# is the only entry (after the runner's own, if any).
env -u PYTORCH_CUDA_ALLOC_CONF "$spillway" run env >"$tmp/env2" 2>&1 || fail "spillway run env"
grep -qxF -- "LD_PRELOAD=${LD_PRELOAD:+$LD_PRELOAD:}$out/libspillway.so" "$tmp/env2" ||
  fail "spillway run env: LD_PRELOAD is $(grep ^LD_PRELOAD= "$tmp/env2")"
grep -qxF "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync" "$tmp/env2" ||
  fail "spillway run env: PYTORCH_CUDA_ALLOC_CONF not defaulted"
# Mode off leaves framework allocators alone.
env -u PYTORCH_CUDA_ALLOC_CONF "$spillway" run --mode off env >"$tmp/env3" 2>&1
grep -q "^PYTORCH_CUDA_ALLOC_CONF=" "$tmp/env3" && fail "--mode off set PYTORCH_CUDA_ALLOC_CONF"
# A command that starts with '-' needs `--`.
expect 2 "unknown option '-c'" -- "$spillway" run -c true
expect 0 '' -- "$spillway" run -- bash -c true

if [[ $failures -ne 0 ]]; then
  echo "$failures launcher check(s) failed"
  exit 1
fi
echo "all launcher checks passed"
