#!/usr/bin/env bash
# The demo: a driver-API job that needs three times the device memory, run without spillway and
# then under `spillway run`. On a machine with an NVIDIA GPU it runs on the real driver (with a
# budget so the job needs 3x of it); elsewhere on simgpu, the simulated GPU, with 1 GiB of memory.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$(bash "$root/scripts/build.sh" | tail -n 1)/out"

if nvidia-smi -L >/dev/null 2>&1; then
  where="the real GPU ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1))"
  job=("$out/oversubscribe" "$@")
  budget=()
else
  where="simgpu (a simulated GPU with ${SIMGPU_MEMORY:=1GiB} of memory)"
  export SIMGPU_MEMORY
  export LD_LIBRARY_PATH="$out/simgpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  job=("$out/oversubscribe" "$@")
  # The engine's budget is the whole simulated device (nothing else runs on it).
  budget=(--device-memory "$SIMGPU_MEMORY")
fi
echo "== demo on $where: ${job[*]##*/}"

run() {  # run LABEL CMD...: runs the job, prints its output and how it ended; sets $code
  echo
  echo "-- $1"
  set +e
  "${@:2}"
  code=$?
  set -e
}

run "without spillway" "${job[@]}"
plain=$code
summary=$(mktemp --suffix=.json)
run "under spillway run" "$out/spillway" run --summary "$summary" "${budget[@]}" -- "${job[@]}"
shimmed=$code

echo
echo "== result"
verdict() {
  case $1 in
    0) echo "finished, checksum verified" ;;
    2) echo "stopped: out of device memory" ;;
    3) echo "FINISHED WITH A WRONG CHECKSUM" ;;
    *) echo "failed (exit $1)" ;;
  esac
}
echo "without spillway:   $(verdict $plain)"
echo "under spillway run: $(verdict $shimmed)"
echo "exit summary:       $summary"
if ((shimmed == 0)); then
  engine=$(grep -o '"engine":{[^}]*}' "$summary" || true)
  echo "engine:             ${engine#\"engine\":}"
elif ((shimmed == 2)); then
  echo "note: the job still ran out of memory under spillway; see the errors in the exit summary"
  echo "      (did the residency engine start? is SPILLWAY_MODE=off set?)."
fi
# A wrong result or a crash is a failure of the demo; out-of-memory is the job's honest outcome.
((plain != 3 && shimmed != 3 && (plain == 0 || plain == 2) && (shimmed == 0 || shimmed == 2)))
