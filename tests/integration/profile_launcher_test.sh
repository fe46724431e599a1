#!/usr/bin/env bash
# `spillway profile` on simgpu: one process -> the trace is at -o TRACE and reads back; a job that
# forks a recording child -> one trace per process (TRACE.<pid>), listed; bad -o and --mode are
# usage errors. Usage: profile_launcher_test.sh OUT_DIR (with simgpu, oversubscribe and
# record_fork_program built there).
set -euo pipefail
out=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

SIMGPU_MEMORY=64MiB "$out/spillway" profile --simgpu -o "$tmp/demo.trace" -- \
  "$out/oversubscribe" --factor 0.5 --buffer 4MiB --passes 1 >"$tmp/log" 2>&1 ||
  { cat "$tmp/log"; fail "profile of the demo failed"; }
[[ -s "$tmp/demo.trace" ]] || { cat "$tmp/log"; fail "no trace at -o"; }
grep -q "trace written to $tmp/demo.trace" "$tmp/log" || { cat "$tmp/log"; fail "no line saying where"; }
head -c 8 "$tmp/demo.trace" | grep -q . || fail "empty trace"
ls "$tmp"/demo.trace.* >/dev/null 2>&1 && fail "a per-pid trace was left behind"

# (Under ASan the child exits holding the run-mode engine it dropped at fork: no leak check.)
ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" SIMGPU_MEMORY=64MiB \
  "$out/spillway" profile --simgpu -o "$tmp/fork.trace" \
  "$out/record_fork_program" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "profile of the forking job failed"; }
count=$(find "$tmp" -name 'fork.trace.*' | wc -l)
[[ $count -eq 2 ]] || { cat "$tmp/log"; ls "$tmp"; fail "expected 2 traces, found $count"; }
grep -q "2 traces written, one per process" "$tmp/log" || { cat "$tmp/log"; fail "traces not listed"; }

if "$out/spillway" profile --mode run -- true 2>"$tmp/err"; then fail "--mode accepted"; fi
grep -q "always record" "$tmp/err" || fail "--mode error unclear: $(cat "$tmp/err")"
if "$out/spillway" profile -o /nonexistent-dir/x.trace -- true 2>"$tmp/err"; then
  fail "an unwritable -o was accepted"
fi
grep -q "/nonexistent-dir" "$tmp/err" || fail "-o error does not name the folder"
echo PASS
