#!/usr/bin/env bash
# `spillway profile` on simgpu: one process -> the trace is at -o TRACE and reads back; a job that
# forks a recording child -> one trace per process (TRACE.<pid>), listed; --progress prints the
# progress line on a stderr that is not a terminal, without it there is none, and the job's exit
# status comes back either way; bad -o (a folder among them) and --mode are usage errors. Usage: profile_launcher_test.sh OUT_DIR (with simgpu, oversubscribe and
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

# (Under ASan the child exits holding the run-mode engine it dropped at fork: no leak check.
# ThreadSanitizer cannot follow a child that starts threads after a fork of a process with
# threads, as the recording child does: the TSan leg sets SPILLWAY_TEST_TSAN and skips this part.)
if [[ -z "${SPILLWAY_TEST_TSAN:-}" ]]; then
  ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" SIMGPU_MEMORY=64MiB \
    "$out/spillway" profile --simgpu -o "$tmp/fork.trace" \
    "$out/record_fork_program" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "profile of the forking job failed"; }
  count=$(find "$tmp" -name 'fork.trace.*' | wc -l)
  [[ $count -eq 2 ]] || { cat "$tmp/log"; ls "$tmp"; fail "expected 2 traces, found $count"; }
  grep -q "2 traces written, one per process" "$tmp/log" || { cat "$tmp/log"; fail "traces not listed"; }
fi

# Two jobs profiled to the same -o at the same time: each lists its own trace only; the first to
# end gets -o, the other keeps its trace at its per-process path and says so; nothing is lost.
for i in 1 2; do
  SIMGPU_MEMORY=64MiB "$out/spillway" profile --simgpu -o "$tmp/same.trace" -- sh -c \
    "'$out/oversubscribe' --factor 0.5 --buffer 4MiB --passes 1 >/dev/null; sleep $i" \
    >"$tmp/same$i.log" 2>&1 &
  eval "job$i=\$!"
done
wait "$job1" || { cat "$tmp/same1.log"; fail "the first of two profiles failed"; }
wait "$job2" || { cat "$tmp/same2.log"; fail "the second of two profiles failed"; }
grep -q "trace written to $tmp/same.trace" "$tmp/same1.log" ||
  { cat "$tmp/same1.log"; fail "the first of two profiles did not write -o"; }
grep -q "^spillway: $tmp/same.trace was written by another job while this one ran; this job's trace is $tmp/same.trace.[0-9]*$" \
  "$tmp/same2.log" || { cat "$tmp/same2.log"; fail "the second of two profiles did not keep its own"; }
grep -q "traces written" "$tmp/same1.log" "$tmp/same2.log" && fail "a profile listed another job's trace"
[[ $(find "$tmp" -name 'same.trace*' | wc -l) -eq 2 ]] || { ls "$tmp"; fail "two profiles: not two traces"; }
"$out/spillway-inspect" "$tmp/same.trace" >/dev/null || fail "the first profile's trace does not read"

# --progress: a line every 2 s; the job records, then outlives its trace by more than 2 s, so one
# line counts the whole trace.
status=0
SIMGPU_MEMORY=64MiB "$out/spillway" profile --progress --simgpu -o "$tmp/slow.trace" -- sh -c \
  "'$out/oversubscribe' --factor 0.5 --buffer 4MiB --passes 1 >/dev/null; sleep 2.5; exit 3" \
  >"$tmp/log" 2>&1 || status=$?
[[ $status -eq 3 ]] || { cat "$tmp/log"; fail "--progress: exit status $status, not the job's 3"; }
grep -Eq '^spillway profile: [0-9]+s, [1-9][0-9]* (B|kB|MB) recorded$' "$tmp/log" ||
  { cat "$tmp/log"; fail "--progress printed no progress line with the trace's bytes"; }
# Not a terminal and no --progress: no progress line.
status=0
SIMGPU_MEMORY=64MiB "$out/spillway" profile --simgpu -o "$tmp/plain.trace" -- sh -c \
  "'$out/oversubscribe' --factor 0.5 --buffer 4MiB --passes 1 >/dev/null; sleep 2.5; exit 4" \
  >"$tmp/log" 2>&1 || status=$?
[[ $status -eq 4 ]] || { cat "$tmp/log"; fail "exit status $status, not the job's 4"; }
[[ -s "$tmp/plain.trace" ]] || { cat "$tmp/log"; fail "no trace without --progress"; }
if grep -q "spillway profile: .* recorded" "$tmp/log"; then
  cat "$tmp/log"
  fail "a progress line on a stderr that is not a terminal, without --progress"
fi

if "$out/spillway" profile --mode run -- true 2>"$tmp/err"; then fail "--mode accepted"; fi
grep -q "always record" "$tmp/err" || fail "--mode error unclear: $(cat "$tmp/err")"
if "$out/spillway" profile -o /nonexistent-dir/x.trace -- true 2>"$tmp/err"; then
  fail "an unwritable -o was accepted"
fi
grep -q "/nonexistent-dir" "$tmp/err" || fail "-o error does not name the folder"
# A folder as -o: the trace would land inside it under another name.
mkdir "$tmp/folder"
if "$out/spillway" profile -o "$tmp/folder" -- true 2>"$tmp/err"; then fail "a folder as -o accepted"; fi
grep -q "is a folder" "$tmp/err" || fail "-o folder error unclear: $(cat "$tmp/err")"
[[ $(wc -l <"$tmp/err") -le 2 ]] || fail "a usage error of more than two lines: $(cat "$tmp/err")"
# -o a link: it stays a link and its target gets the trace; a link to a device (/dev/null) is
# written through, the device kept (the trace was once moved over the link, or the device).
echo old >"$tmp/target.trace"
ln -s "$tmp/target.trace" "$tmp/link.trace"
ln -s /dev/null "$tmp/null.trace"
for output in "$tmp/link.trace" "$tmp/null.trace"; do
  SIMGPU_MEMORY=64MiB "$out/spillway" profile --simgpu -o "$output" -- \
    "$out/oversubscribe" --factor 0.5 --buffer 4MiB --passes 1 >"$tmp/log" 2>&1 ||
    { cat "$tmp/log"; fail "profile -o $output failed"; }
  [[ -L "$output" ]] || fail "-o $output: the link was replaced"
done
"$out/spillway-inspect" "$tmp/link.trace" >/dev/null 2>&1 || fail "the link's target holds no trace"
[[ -c /dev/null ]] || fail "/dev/null is no longer a device"
mkfifo "$tmp/fifo.trace"
if "$out/spillway" profile -o "$tmp/fifo.trace" -- true 2>"$tmp/err"; then fail "a FIFO as -o accepted"; fi
grep -q "is a FIFO or a socket" "$tmp/err" || fail "-o FIFO error unclear: $(cat "$tmp/err")"
echo PASS
