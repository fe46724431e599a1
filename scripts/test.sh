#!/usr/bin/env bash
# Runs spillway's CPU tests (everything not labelled `gpu`): installs what is missing, builds,
# runs ctest. --sanitize runs the same tests built with ASan + UBSan; --all runs both legs;
# --tsan runs them built with ThreadSanitizer (not part of --all).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

run_leg() {
  local dir
  dir=$("$root/scripts/build.sh" "$@" | tail -n 1)
  echo "== ctest ${1:-(plain)} in $dir"
  if [[ "${1:-}" == "--sanitize" ]]; then
    # simgpu catches kernels' accesses to non-resident managed memory with its own SIGSEGV
    # handler; the shim is preloaded ahead of libasan in the tests that run jobs under it.
    export ASAN_OPTIONS="handle_segv=0:allow_user_segv_handler=1:verify_asan_link_order=0:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
  elif [[ "${1:-}" == "--tsan" ]]; then
    # Every process the tests start is built with TSan; a report fails the process (exit 66).
    export TSAN_OPTIONS="suppressions=$root/scripts/tsan.supp:handle_segv=0:allow_user_segv_handler=1:report_signal_unsafe=0:history_size=4${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
  fi
  local skip=()
  # trace_test is the trace writer's own: its state is guarded by absl::Mutex, which TSan cannot
  # see (scripts/tsan.supp), and matching its thousands of reports to the suppressions takes
  # longer than the test's timeout.
  [[ "${1:-}" == "--tsan" ]] && skip=(-E '^trace_test$')
  # scripts_gpu_check_test checks what scripts/gpu_check.sh does with its stages and results on
  # simgpu: bash the sanitizers do not see, run by the plain leg; the library code it reaches is
  # run under the sanitizers by the other tests. It is the slowest test of this leg (about 120 s).
  # So are the planner's long simulations (planner_engine_test and the two budget sweeps, about
  # 220 s of this leg on two cores): the same planner and simulator code runs under the
  # sanitizers in planner_test, and inside jobs (online planning) in train_like_test.
  [[ "${1:-}" == "--sanitize" ]] &&
    skip=(-E '^(scripts_gpu_check_test|planner_engine_test|planner_budgets_cnn_test|planner_budgets_other_test)$')
  # TSan slows the tests five- to fifteenfold: planner_test's simulations alone take about 380 s
  # under it on two cores (2026-11-25), past the 300 s the other legs allow each test.
  local timeout=300
  [[ "${1:-}" == "--tsan" ]] && timeout=900
  (cd "$dir" && ctest -LE gpu "${skip[@]}" --output-on-failure -j "$(nproc)" --timeout "$timeout")
}

case "${1:-}" in
  "") run_leg ;;
  --sanitize) run_leg --sanitize ;;
  --tsan) run_leg --tsan ;;
  --all) run_leg && run_leg --sanitize ;;
  -h|--help) echo "usage: scripts/test.sh [--sanitize | --tsan | --all]"; exit 0 ;;
  *) echo "test.sh: unknown option '$1' (use --sanitize, --tsan or --all)" >&2; exit 2 ;;
esac
