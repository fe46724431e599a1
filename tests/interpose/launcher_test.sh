#!/usr/bin/env bash
# Tests of the `spillway` launcher in build/out: help and version texts, usage errors (exit 2),
# the environment `spillway run` hands to the command and its children (LD_PRELOAD kept and
# extended, framework allocator settings where the user chose none), the summary lines printed at
# the end (or not, with --quiet), signals reaching the job once (sent to the launcher or to the
# whole group), the launcher ending as the job did (exit status or signal), and what is checked
# before the job starts (sizes, paths, the program). With "simgpu" as the second argument it also
# runs a driver-API job on simgpu under the launcher.
# usage: launcher_test.sh OUT_DIR [simgpu]
set -uo pipefail
out=$(cd "$1" && pwd)
with_simgpu=${2:-}
spillway="$out/spillway"
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/check_lib.sh"

expect 0 '^usage: spillway' -- "$spillway" --help
expect 0 '^spillway [0-9]+\.[0-9]+' -- "$spillway" --version
expect 0 '^usage: spillway run' -- "$spillway" run --help
expect 0 '^spillway [0-9]+\.[0-9]+' -- "$spillway" run --version
expect 0 '^usage: spillway doctor' -- "$spillway" doctor --help
expect 0 '^spillway [0-9]+\.[0-9]+' -- "$spillway" doctor --version
expect 2 'spillway: missing command' -- "$spillway"
expect 2 'unknown command .frobnicate.' -- "$spillway" frobnicate
expect 2 '^spillway: run: missing command to run' -- "$spillway" run
expect 2 'spillway run --help lists its options' -- "$spillway" run --summary /tmp/x
expect 2 "^spillway: run: unknown option '--bogus'" -- "$spillway" run --bogus -- true
expect 2 "^spillway: run: bad --mode 'turbo'" -- "$spillway" run --mode turbo -- true
expect 2 "^spillway: run: bad --log 'loud'" -- "$spillway" run --log loud -- true
expect 2 "^spillway: run: bad --device-memory '3GX'" -- "$spillway" run --device-memory 3GX true
expect 2 "^spillway: doctor: unknown option '--frob'" -- "$spillway" doctor --frob
expect 1 '' -- "$spillway" run -- false

# With stdin, stdout and stderr closed, or stderr full, the job still runs and the launcher ends
# as it did (it once stopped at its first message under set -e, before the job started).
rm -f "$tmp/ran"
rc=0; "$spillway" run -- sh -c "touch '$tmp/ran'; exit 3" <&- >&- 2>&- || rc=$?
[[ $rc -eq 3 && -e "$tmp/ran" ]] || fail "closed stdin, stdout and stderr: exit $rc, ran: $([[ -e "$tmp/ran" ]] && echo yes || echo no)"
rm -f "$tmp/ran"
rc=0; "$spillway" run -- sh -c "touch '$tmp/ran'; exit 4" 2>/dev/full || rc=$?
[[ $rc -eq 4 && -e "$tmp/ran" ]] || fail "stderr full: exit $rc, ran: $([[ -e "$tmp/ran" ]] && echo yes || echo no)"

# On a driver before CUDA 13.0 (no managed memory pools) the launcher leaves PyTorch's and
# TensorFlow's allocators alone (checked on simgpu below); the checks run outside simgpu expect
# what this machine's driver, if any, makes the launcher do.
host_cuda=$("$out/spillway-doctor" --driver-version 2>/dev/null || true)
old_host_driver=0
[[ "$host_cuda" =~ ^[0-9]+$ && $host_cuda -lt 13000 ]] && old_host_driver=1
stream_ordered_defaults=("PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync" "TF_GPU_ALLOCATOR=cuda_malloc_async")
[[ $old_host_driver -eq 1 ]] && stream_ordered_defaults=()

# The environment the command sees. The user's own LD_PRELOAD (plus whatever the test runner
# preloads, e.g. the sanitizer runtimes) stays in front.
user_preload="${LD_PRELOAD:+$LD_PRELOAD:}$out/libspillway_noop_kernels.so"
LD_PRELOAD="$user_preload" PYTORCH_CUDA_ALLOC_CONF=mine \
  "$spillway" run --summary "$tmp/s.json" --mode record --log debug --log-file "$tmp/log" \
  --device-memory 8GiB -- env >"$tmp/env" 2>"$tmp/err" || fail "spillway run -- env failed: $(cat "$tmp/err")"
for line in "LD_PRELOAD=$user_preload:$out/libspillway.so" "SPILLWAY_SUMMARY=$tmp/s.json" \
            "SPILLWAY_MODE=record" "SPILLWAY_LOG=debug" "SPILLWAY_LOG_FILE=$tmp/log" \
            "SPILLWAY_DEVICE_MEMORY=8GiB" "PYTORCH_CUDA_ALLOC_CONF=mine" \
            "${stream_ordered_defaults[@]:1}" "XLA_PYTHON_CLIENT_PREALLOCATE=false"; do
  grep -qxF -- "$line" "$tmp/env" || fail "spillway run -- env: missing '$line'"
done
# env made no CUDA call, but no summary existed yet: it writes an all-zero one.
grep -q '"mode":"record"' "$tmp/s.json" 2>/dev/null || fail "no summary from spillway run -- env"

# Without --: the command starts at the first non-option; with no LD_PRELOAD of the user's, ours
# is the only entry (after the runner's own, if any).
env -u PYTORCH_CUDA_ALLOC_CONF "$spillway" run env >"$tmp/env2" 2>&1 || fail "spillway run env"
grep -qxF -- "LD_PRELOAD=${LD_PRELOAD:+$LD_PRELOAD:}$out/libspillway.so" "$tmp/env2" ||
  fail "spillway run env: LD_PRELOAD is $(grep ^LD_PRELOAD= "$tmp/env2")"
[[ $old_host_driver -eq 1 ]] || grep -qxF "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync" "$tmp/env2" ||
  fail "spillway run env: PYTORCH_CUDA_ALLOC_CONF not defaulted"
# Mode off leaves framework allocators alone.
env -u PYTORCH_CUDA_ALLOC_CONF "$spillway" run --mode off env >"$tmp/env3" 2>&1
grep -q "^PYTORCH_CUDA_ALLOC_CONF=" "$tmp/env3" && fail "--mode off set PYTORCH_CUDA_ALLOC_CONF"
# A command that starts with '-' needs `--`.
expect 2 "unknown option '-c'" -- "$spillway" run -c true
expect 0 '' -- "$spillway" run -- bash -c true

# The new options: bad values name the option, good ones reach the environment.
expect 2 "^spillway: run: bad --eviction 'mru' \(expected learned, lru or none\)" -- \
  "$spillway" run --eviction mru -- true
expect 2 "^spillway: run: bad --host-memory 'lots'" -- "$spillway" run --host-memory lots true
expect 2 "^spillway: run: bad --policy '$tmp/none.toml' \(no such readable file\)" -- \
  "$spillway" run --policy "$tmp/none.toml" true
expect 2 "^spillway: option --eviction needs a value" -- "$spillway" run --eviction
expect 2 "^spillway: run: unknown option '--quiet-please'" -- "$spillway" run --quiet-please true
echo '# policy' >"$tmp/p.toml"
expect 2 "^spillway: run: --ballast-headroom needs --ballast" -- \
  "$spillway" run --ballast-headroom 1GiB true
expect 2 "^spillway: run: bad --ballast-headroom 'some'" -- \
  "$spillway" run --ballast --ballast-headroom some true
env -u SPILLWAY_BALLAST "$spillway" run -q --eviction learned --ballast --host-memory 2GiB \
  --ballast-headroom 768MiB --policy "$tmp/p.toml" -- env >"$tmp/env4" 2>&1 ||
  fail "spillway run with all options failed"
for line in "SPILLWAY_EVICTION=learned" "SPILLWAY_BALLAST=1" "SPILLWAY_HOST_MEMORY=2GiB" \
            "SPILLWAY_BALLAST_HEADROOM=768MiB" \
            "SPILLWAY_POLICY=$(readlink -f "$tmp/p.toml")"; do
  grep -qxF -- "$line" "$tmp/env4" || fail "spillway run --eviction/--ballast/...: missing '$line'"
done

# Framework settings: defaults where the user chose nothing, the user's values win, children and
# grandchildren inherit the settings and the preload.
framework_vars=(PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF TF_GPU_ALLOCATOR TF_FORCE_GPU_ALLOW_GROWTH
                XLA_PYTHON_CLIENT_PREALLOCATE XLA_PYTHON_CLIENT_ALLOCATOR)
clean_env=(env)
for v in "${framework_vars[@]}"; do clean_env+=(-u "$v"); done
"${clean_env[@]}" TF_GPU_ALLOCATOR=bfc XLA_PYTHON_CLIENT_PREALLOCATE=true \
  "$spillway" run -- bash -c 'bash -c env' >"$tmp/env5" 2>"$tmp/err5" || fail "nested env failed"
for line in "${stream_ordered_defaults[@]:0:1}" "TF_GPU_ALLOCATOR=bfc" \
            "TF_FORCE_GPU_ALLOW_GROWTH=true" "XLA_PYTHON_CLIENT_PREALLOCATE=true" \
            "XLA_PYTHON_CLIENT_ALLOCATOR=platform" \
            "LD_PRELOAD=${LD_PRELOAD:+$LD_PRELOAD:}$out/libspillway.so"; do
  grep -qxF -- "$line" "$tmp/env5" || fail "grandchild of spillway run: missing '$line'"
done
grep -q "^spillway: framework settings: set ${stream_ordered_defaults[0]:-}.*kept yours: TF_GPU_ALLOCATOR XLA_PYTHON_CLIENT_PREALLOCATE$" \
  "$tmp/err5" || fail "no framework settings line: $(cat "$tmp/err5")"
# PYTORCH_ALLOC_CONF (PyTorch 2.9+) counts as the user's choice for PyTorch.
"${clean_env[@]}" PYTORCH_ALLOC_CONF=backend:native "$spillway" run -q env >"$tmp/env6" 2>&1
grep -q "^PYTORCH_CUDA_ALLOC_CONF=" "$tmp/env6" && fail "PYTORCH_ALLOC_CONF set, yet PYTORCH_CUDA_ALLOC_CONF was set"
# --framework-allocator keeps the caching allocators, still grows on demand.
"${clean_env[@]}" "$spillway" run --framework-allocator env >"$tmp/env7" 2>"$tmp/err7"
grep -qE "^(PYTORCH_CUDA_ALLOC_CONF|TF_GPU_ALLOCATOR|XLA_PYTHON_CLIENT_ALLOCATOR)=" "$tmp/env7" &&
  fail "--framework-allocator set an allocator: $(grep -E '_ALLOC' "$tmp/env7")"
grep -qxF "TF_FORCE_GPU_ALLOW_GROWTH=true" "$tmp/env7" || fail "--framework-allocator: no growth"
# expandable segments (VMM) get a warning.
"${clean_env[@]}" PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$spillway" run true 2>"$tmp/err8"
grep -q "^spillway: warning: expandable_segments:True" "$tmp/err8" || fail "no expandable_segments warning"
# --quiet prints nothing of spillway's own; the exit status is kept either way.
expect 7 '' -- "$spillway" run -q -- bash -c 'exit 7'
grep -q 'spillway' "$tmp/out" && fail "--quiet printed: $(cat "$tmp/out")"
expect 7 '^spillway: no process of the job made a CUDA call' -- "$spillway" run -- bash -c 'exit 7'
# A job killed by a signal wrote no summary, and the line says so (not "no CUDA call").
expect 137 '^spillway: no exit summary: the job was ended by signal 9 \(SIGKILL\)' -- "$spillway" run -- bash -c 'kill -9 $$'
expect 0 '^spillway: framework settings' -- "$spillway" run -- true
expect 0 '' -- "$spillway" run --mode off -- true
grep -q 'framework settings' "$tmp/out" && fail "--mode off printed framework settings"

# The summary lines read the summary defensively: unknown and nested fields, escaped strings,
# missing engine fields. The job writes the file itself (its bash reaches no hook, so the shim
# keeps an existing file).
cat >"$tmp/job.sh" <<'EOF'
printf '%s' '{"version":"9","pid":4242,"future":{"x":[1,{"y":"a\"b"}]},"calls":{"cuInit":1},' \
  '"allocations":{"bytes_peak":3221225472},"engine":{"policy":"learned","evict_bytes":1048576},' \
  '"errors":["cuMemPrefetchAsync: \"bad\" value","second"]}' >"$SPILLWAY_SUMMARY"
exit 3
EOF
expect 3 '^spillway: pid 4242: policy learned, budget \?, peak 3.00 GiB, prefetched \?, evicted 1.0 MiB, 2 errors$' -- \
  "$spillway" run --summary "$tmp/own.json" -- bash "$tmp/job.sh"
grep -qF 'spillway:   first error: cuMemPrefetchAsync: \"bad\" value' "$tmp/out" ||
  fail "no first error line: $(cat "$tmp/out")"
grep -qxF "spillway:   summary: $tmp/own.json" "$tmp/out" || fail "no summary path line"
grep -q "steps followed" "$tmp/out" && fail "a plan line without a plan: $(cat "$tmp/out")"
# The online plan's line: how far it was followed and its trial's verdict.
cat >"$tmp/plan_job.sh" <<'EOF'
printf '%s' '{"pid":7,"calls":{"cuInit":1},"engine":{"policy":"learned","policy_file":' \
  '{"path":"online plan","steps_followed":15,"mismatches":1,"trial":"rejected",' \
  '"trial_plan_step_ms":412.2754,"trial_learned_step_ms":398.4229}},"errors":[]}' >"$SPILLWAY_SUMMARY"
EOF
expect 0 '^spillway:   online plan: 15 steps followed, 1 mismatch; rejected after its trial \(a step 412.275 ms following it, 398.423 ms with the learned policy\)$' -- \
  "$spillway" run --summary "$tmp/plan.json" -- bash "$tmp/plan_job.sh"
# An online plan never made (no step followed, no trial) gets no line.
cat >"$tmp/no_plan_job.sh" <<'EOF'
printf '%s' '{"pid":8,"calls":{"cuInit":1},"engine":{"policy":"learned","policy_file":' \
  '{"path":"online plan","steps_followed":0,"mismatches":0,"trial":""}},"errors":[]}' >"$SPILLWAY_SUMMARY"
EOF
expect 0 '^spillway: pid 8: policy learned' -- "$spillway" run --summary "$tmp/no_plan.json" -- bash "$tmp/no_plan_job.sh"
grep -q "steps followed" "$tmp/out" && fail "a plan line for a plan never made: $(cat "$tmp/out")"
grep -q "own step" "$tmp/out" && fail "a thread line without thread steps: $(cat "$tmp/out")"
grep -q "launch order" "$tmp/out" && fail "a reorder line without reordered launches: $(cat "$tmp/out")"
# Replicas on their own threads: the learned policy followed each thread's own step.
cat >"$tmp/threads_job.sh" <<'EOF'
printf '%s' '{"pid":9,"calls":{"cuInit":1},"engine":{"policy":"learned","step_length":0,' \
  '"thread_steps":2},"errors":[]}' >"$SPILLWAY_SUMMARY"
EOF
expect 0 "^spillway:   learned: each launching thread's own step \\(2 threads; their launches interleave, so the job as a whole repeats no step\\)$" -- \
  "$spillway" run --summary "$tmp/threads.json" -- bash "$tmp/threads_job.sh"
# A job whose launch order changes from step to step (TensorFlow's executor): the step was learned.
cat >"$tmp/reorder_job.sh" <<'EOF'
printf '%s' '{"pid":10,"calls":{"cuInit":1},"engine":{"policy":"learned","step_length":74,' \
  '"reordered_launches":762},"errors":[]}' >"$SPILLWAY_SUMMARY"
EOF
expect 0 "^spillway:   learned: the job's launch order changes from step to step \\(762 launches at another place than in the step before\\); its step is learned all the same$" -- \
  "$spillway" run --summary "$tmp/reorder.json" -- bash "$tmp/reorder_job.sh"

# Waits up to 30 s for the file $1 to exist (a job's handshake; a fixed sleep loses the race on a
# loaded machine).
wait_for() {
  local _
  for _ in $(seq 600); do
    [[ -e "$1" ]] && return 0
    sleep 0.05
  done
  return 1
}

# Signals sent to the launcher reach the job; its status comes back.
"$spillway" run -- bash -c 'trap "exit 3" TERM; : >"$1"; sleep 10 & wait' job "$tmp/ready" \
  >/dev/null 2>&1 &
launcher=$!
wait_for "$tmp/ready" || fail "the job under the launcher did not start within 30 s"
kill -TERM "$launcher"
wait "$launcher"
rc=$?
[[ $rc -eq 3 ]] || fail "TERM to the launcher: exit $rc, want 3 (the job's)"

# count_job.sh SIGNAL READY COUNT: counts SIGNAL (each one interrupts `wait`, so each runs the
# trap), says when its trap is set, and half a second after the first one (time for a second copy
# to come) writes the count and an exit summary of its own, then exits 5.
cat >"$tmp/count_job.sh" <<'EOF'
n=0
trap 'n=$((n + 1))' "$1"
: >"$2"
sleep 10 &
sleeper=$!
while ((n == 0)) && kill -0 $sleeper 2>/dev/null; do wait $sleeper; done
sleep 0.5 &
while kill -0 $! 2>/dev/null; do wait $!; done
kill $sleeper 2>/dev/null
printf '%s' '{"pid":77,"calls":{"cuInit":1},"errors":[]}' >"$SPILLWAY_SUMMARY"
echo "$n" >"$3"
exit 5
EOF
# signal_check COMMAND SIGNAL TARGET: runs count_job.sh under `spillway COMMAND` in a process group
# of its own and sends SIGNAL to the launcher alone (TARGET launcher) or to the whole group (TARGET
# group, as Ctrl-C on a terminal, `kill -- -PGID`, scancel and systemd do). The launcher waits for
# the job, the job gets the signal once, and the launcher returns its status.
signal_check() {
  local command=$1 sig=$2 target=$3 launcher rc count what="$2 to the $3 of spillway $1"
  local args=()
  [[ $command == profile ]] && args=(-o "$tmp/signal.trace")
  rm -f "$tmp/ready" "$tmp/count"
  set -m  # a process group of its own, where INT and QUIT are not ignored
  "$spillway" "$command" "${args[@]}" -- bash "$tmp/count_job.sh" "$sig" "$tmp/ready" "$tmp/count" \
    >"$tmp/signal_out" 2>&1 &
  launcher=$!
  set +m
  if ! wait_for "$tmp/ready"; then
    fail "$what: the job did not start within 30 s"
    kill -KILL -- -"$launcher"
    return
  fi
  if [[ $target == group ]]; then kill -"$sig" -- -"$launcher"; else kill -"$sig" "$launcher"; fi
  wait "$launcher"
  rc=$?
  count=$(cat "$tmp/count" 2>/dev/null)
  [[ $rc -eq 5 ]] || fail "$what: exit $rc, want 5 (the job's)"
  [[ -n "$count" ]] || fail "$what: the launcher ended before the job"
  [[ -z "$count" || $count -eq 1 ]] || fail "$what: the job got it $count times, want once"
  grep -q '^spillway: pid 77:' "$tmp/signal_out" ||
    fail "$what: no summary line: $(cat "$tmp/signal_out")"
}
signal_check run INT launcher
signal_check run INT group
signal_check run TERM group
signal_check run QUIT launcher
signal_check profile TERM launcher
signal_check profile INT group
# Signals beyond the usual ones (a timer's, a CPU limit's, a real-time one) that kill a process by
# default but the job handles: without the launcher trapping them it died and left the job behind.
signal_check run ALRM group
signal_check run XCPU launcher
signal_check run "$(($(kill -l RTMIN) + 2))" group

# A launcher killed outright (SIGKILL: torchrun, Popen.kill, a scheduler's last resort) takes the
# job with it, as killing the job itself would have, instead of leaving it running.
rm -f "$tmp/ready"
"$spillway" run -- bash -c 'echo $$ >"$1.pid"; : >"$1"; exec sleep 30' job "$tmp/ready" \
  >/dev/null 2>&1 &
launcher=$!
wait_for "$tmp/ready" || fail "the job to be killed did not start within 30 s"
job_pid=$(cat "$tmp/ready.pid")
kill -KILL "$launcher"
wait "$launcher" 2>/dev/null || true
for _ in $(seq 200); do kill -0 "$job_pid" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$job_pid" 2>/dev/null; then
  kill -KILL "$job_pid"
  fail "SIGKILL to the launcher left the job running"
fi

# spillway-wait killed outright (SIGKILL, the OOM killer) takes the job with it, and the launcher
# says so, instead of leaving the job running unwatched while it reports the job killed.
rm -f "$tmp/ready"
"$spillway" run -- bash -c 'echo $$ >"$1.pid"; : >"$1"; exec sleep 30' job "$tmp/ready" \
  >/dev/null 2>"$tmp/waiter-killed.err" &
launcher=$!
wait_for "$tmp/ready" || fail "the job under a killed spillway-wait did not start within 30 s"
job_pid=$(cat "$tmp/ready.pid")
waiter_pid=$(awk '{print $4}' "/proc/$job_pid/stat")
[[ "$(cat "/proc/$waiter_pid/comm")" == spillway-wait ]] ||
  fail "the job's parent is $(cat "/proc/$waiter_pid/comm"), not spillway-wait"
kill -KILL "$waiter_pid"
rc=0
wait "$launcher" || rc=$?
for _ in $(seq 200); do kill -0 "$job_pid" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$job_pid" 2>/dev/null; then
  kill -KILL "$job_pid"
  fail "SIGKILL to spillway-wait left the job running"
fi
[[ $rc -eq 137 ]] || fail "SIGKILL to spillway-wait: the launcher exited $rc, want 137"
grep -q "^spillway: spillway-wait, the job's parent, was killed by signal 9 (SIGKILL); the job" \
  "$tmp/waiter-killed.err" || fail "SIGKILL to spillway-wait: $(cat "$tmp/waiter-killed.err")"

# A launcher gone before spillway-wait could watch it (here: a --parent that is not its parent)
# starts no job; the death signal's number sent by anyone else while the launcher lives kills
# nothing (the job handles it, as without spillway).
rm -f "$tmp/orphan"
"$out/spillway-wait" --status "$tmp/orphan.status" --parent 999999 -- touch "$tmp/orphan" \
  >/dev/null 2>&1
rc=$?
[[ $rc -eq 137 ]] || fail "spillway-wait with its parent gone: exit $rc, want 137"
[[ ! -e "$tmp/orphan" ]] || fail "spillway-wait with its parent gone started the job"
rm -f "$tmp/ready"
"$out/spillway-wait" --status "$tmp/rtmax.status" --parent $$ -- \
  bash -c 'trap "" RTMAX; : >"$1"; sleep 1; exit 4' job "$tmp/ready" >/dev/null 2>&1 &
waiter=$!
wait_for "$tmp/ready" || fail "the RTMAX job did not start within 30 s"
kill -RTMAX "$waiter"
wait "$waiter"
rc=$?
[[ $rc -eq 4 && $(cat "$tmp/rtmax.status") == "exit 4" ]] ||
  fail "RTMAX from a bystander: spillway-wait exit $rc ($(cat "$tmp/rtmax.status")), want exit 4"

# The launcher ends as the job does, as its parent sees it: an exit status that reads like a
# signal's (143 = 128 + TERM) stays an exit status, a death by a signal stays one (and the
# launcher dumps no core of its own). spillway-wait is the observer: bash's `wait` cannot tell.
ends() {
  "$out/spillway-wait" --status "$tmp/ends" -- "$@" >/dev/null 2>&1
  cat "$tmp/ends"
}
ulimit -c 0
[[ $(ends sh -c 'kill -SEGV $$') == "signal 11" ]] || fail "spillway-wait: a SEGV is not a signal"
for job in 'exit 143' 'exit 130' 'exit 0' 'kill -SEGV $$' 'kill -ABRT $$' 'kill -TERM $$' \
           'kill -USR1 $$'; do
  want=$(ends sh -c "$job")
  got=$(ends "$spillway" run -- sh -c "$job")
  [[ "$got" == "$want" ]] || fail "spillway run -- sh -c '$job': $got, want $want"
  got=$(ends "$spillway" profile -o "$tmp/ends.trace" -- sh -c "$job")
  [[ "$got" == "$want" ]] || fail "spillway profile -- sh -c '$job': $got, want $want"
done

# A TMPDIR that does not exist keeps no job from running: the scratch folder goes to /tmp.
expect 0 '^job ran$' -- env TMPDIR=/nonexistent "$spillway" run -- echo job ran
expect 0 '^job ran$' -- env TMPDIR=/nonexistent "$spillway" profile -o "$tmp/tmpdir.trace" -- \
  echo job ran
# Without spillway-wait (a partial install) the job runs all the same, without the summary lines.
mkdir "$tmp/no_wait"
cp "$spillway" "$tmp/no_wait/"
ln -s "$out/libspillway.so" "$out/spillway-doctor" "$tmp/no_wait/"
expect 3 '^spillway: run: .*/spillway-wait not found: the job runs without the summary lines$' -- \
  "$tmp/no_wait/spillway" run -- sh -c 'echo job ran; exit 3'
grep -qx 'job ran' "$tmp/out" || fail "without spillway-wait the job did not run: $(cat "$tmp/out")"

# Relative paths become absolute before the job starts (it may change directory).
(cd "$tmp" && "$spillway" run -q --summary rel.json --log-file rel.log -- env) >"$tmp/env12" 2>&1
(cd "$tmp" && "$spillway" profile -q -o rel.trace -- env) >"$tmp/env13" 2>&1
for line in "SPILLWAY_SUMMARY=$tmp/rel.json" "SPILLWAY_LOG_FILE=$tmp/rel.log" \
            "SPILLWAY_TRACE=$tmp/rel.trace.%p"; do
  grep -qxF -- "$line" "$tmp/env12" "$tmp/env13" || fail "relative paths: missing '$line'"
done

# LD_PRELOAD splits at spaces and colons, so spillway in a folder with one cannot be preloaded:
# refused in one line, the job not started.
for dir in "$tmp/with space" "$tmp/with:colon"; do
  mkdir "$dir"
  cp "$spillway" "$dir/"
  ln -s "$out/libspillway.so" "$out/spillway-doctor" "$out/spillway-wait" "$dir/"
  expect 2 "^spillway: run: cannot preload '$dir/libspillway.so': LD_PRELOAD cannot hold" -- \
    "$dir/spillway" run -- touch "$tmp/started"
  [[ $(wc -l <"$tmp/out") -eq 1 ]] || fail "preload from '$dir': not one line: $(cat "$tmp/out")"
  [[ -e "$tmp/started" ]] && fail "preload from '$dir': the job ran without spillway"
done

# Sizes are read by the library's own parser and must be at least one 4 KiB page.
for size in 0 0.4 0.5 4095 99999999TiB; do
  expect 2 "^spillway: run: bad --device-memory '$size'" -- "$spillway" run --device-memory "$size" true
done
expect 2 "^spillway: profile: bad --device-memory '0'" -- "$spillway" profile --device-memory 0 true
for size in 1PiB 4KiB 4096; do
  expect 0 "^SPILLWAY_DEVICE_MEMORY=$size$" -- "$spillway" run -q --device-memory "$size" env
done
expect 0 '^SPILLWAY_HOST_MEMORY=0$' -- "$spillway" run -q --host-memory 0 env

# A summary that cannot be written and a program that does not exist: one line each, checked before
# the job starts (127 and 126 as a shell has them).
expect 2 '^spillway: run: cannot write the summary into /nonexistent \(--summary /nonexistent/s.json\)$' -- \
  "$spillway" run --summary /nonexistent/s.json -- true
[[ $(wc -l <"$tmp/out") -eq 1 ]] || fail "unwritable --summary: not one line: $(cat "$tmp/out")"
expect 127 '^spillway: run: command not found: nonexistent-prog$' -- "$spillway" run nonexistent-prog
[[ $(wc -l <"$tmp/out") -eq 1 ]] || fail "a missing program: not one line: $(cat "$tmp/out")"
expect 127 "^spillway: run: no such file: $tmp/none$" -- "$spillway" run -q "$tmp/none"
expect 126 "^spillway: run: cannot run $tmp/p.toml: not an executable file$" -- \
  "$spillway" run "$tmp/p.toml"

# A real job on simgpu: one line per process that used CUDA, with %p one summary each.
if [[ "$with_simgpu" == simgpu ]]; then
  job=("$out/oversubscribe" --factor 2 --buffer 4MiB --passes 1)
  expect 0 '^spillway: pid [0-9]+: policy [a-z]+, budget 64.0 MiB, peak 128.0 MiB, prefetched [0-9.]+ MiB, evicted [0-9.]+ MiB, 0 errors$' -- \
    env SIMGPU_MEMORY=64MiB "$spillway" run --simgpu --device-memory 64MiB -- "${job[@]}"
  expect 4 '' -- env SIMGPU_MEMORY=64MiB "$spillway" run --simgpu --device-memory 64MiB \
    --summary "$tmp/rank-%p.json" -- bash -c "${job[*]} & ${job[*]}; wait; exit 4"
  lines=$(grep -c '^spillway: pid [0-9]*: policy [a-z]*, budget' "$tmp/out")
  files=$(find "$tmp" -name 'rank-*.json' | wc -l)
  [[ $lines -eq 2 && $files -ge 2 ]] ||
    fail "two simgpu processes: $lines summary lines, $files files: $(cat "$tmp/out")"
  expect 0 '' -- env SIMGPU_MEMORY=64MiB "$spillway" run -q --simgpu --device-memory 64MiB -- "${job[@]}"
  grep -q '^spillway' "$tmp/out" && fail "--quiet printed a summary: $(cat "$tmp/out")"

  # A bad SPILLWAY_* value is said once, by the process that uses CUDA: the shell and `timeout`
  # around it carry the preload too, and say nothing.
  SIMGPU_MEMORY=64MiB SPILLWAY_EVICTION=bogus "$spillway" run -q --simgpu --device-memory 64MiB -- \
    sh -c "timeout 120 ${job[*]}" >/dev/null 2>"$tmp/bad-env.err" ||
    fail "a bad SPILLWAY_EVICTION: the job failed: $(cat "$tmp/bad-env.err")"
  said=$(grep -c "SPILLWAY_EVICTION" "$tmp/bad-env.err" || true)
  [[ $said -eq 1 ]] || fail "a bad SPILLWAY_EVICTION was said $said times, want once: $(cat "$tmp/bad-env.err")"

  # PyTorch's and TensorFlow's per-tensor allocators are stream-ordered, which needs managed memory
  # pools (CUDA 13.0): on an older driver those two keep their caching allocators, and a line says
  # why; JAX's (cuMemAlloc) is set still.
  "${clean_env[@]}" -u SIMGPU_DRIVER_VERSION "$spillway" run --simgpu env >"$tmp/env9" 2>"$tmp/err9"
  grep -qxF "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync" "$tmp/env9" ||
    fail "a CUDA 13 driver: no per-tensor allocator for PyTorch: $(cat "$tmp/err9")"
  "${clean_env[@]}" SIMGPU_DRIVER_VERSION=12040 "$spillway" run --simgpu env >"$tmp/env10" 2>"$tmp/err10"
  grep -qE "^(PYTORCH_CUDA_ALLOC_CONF|TF_GPU_ALLOCATOR)=" "$tmp/env10" &&
    fail "a CUDA 12.4 driver: stream-ordered allocators set: $(grep -E '_ALLOC' "$tmp/env10")"
  for line in "TF_FORCE_GPU_ALLOW_GROWTH=true" "XLA_PYTHON_CLIENT_ALLOCATOR=platform"; do
    grep -qxF "$line" "$tmp/env10" || fail "a CUDA 12.4 driver: missing '$line'"
  done
  grep -q "^spillway: the driver is CUDA 12.4, without managed memory pools (CUDA 13.0): PyTorch and TensorFlow keep" "$tmp/err10" ||
    fail "a CUDA 12.4 driver: no line saying why: $(cat "$tmp/err10")"
  # The user's own stream-ordered choice is kept, listed, and warned about; the other framework's
  # allocator is left alone.
  "${clean_env[@]}" SIMGPU_DRIVER_VERSION=12040 PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync \
    "$spillway" run --simgpu env >"$tmp/env11" 2>"$tmp/err11"
  grep -qxF "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync" "$tmp/env11" || fail "the user's PyTorch setting lost"
  grep -q "^TF_GPU_ALLOCATOR=" "$tmp/env11" && fail "a CUDA 12.4 driver: TF_GPU_ALLOCATOR set"
  for pattern in "kept yours: PYTORCH_CUDA_ALLOC_CONF" ": TensorFlow keeps its caching allocator" \
                 "^spillway: warning: the driver is CUDA 12.4.*PyTorch's cudaMallocAsync backend allocates stream-ordered"; do
    grep -q -- "$pattern" "$tmp/err11" || fail "a CUDA 12.4 driver, PyTorch chosen: no '$pattern': $(cat "$tmp/err11")"
  done
fi

finish "launcher"
