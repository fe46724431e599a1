#!/usr/bin/env bash
# Tests of scripts/gpu_check.sh without a GPU: usage errors, --dry-run (every step listed with the
# commands of the GPU flow), and a short --simgpu run of the doctor, oversubscription and memsets
# steps against the build output (results file, table printed last, exit status).
# usage: gpu_check_test.sh SOURCE_DIR OUT_DIR
set -uo pipefail
src=$(cd "$1" && pwd)
out=$(cd "$2" && pwd)
check="$src/scripts/gpu_check.sh"
python=$(command -v python3)
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

expect 0 '^usage: scripts/gpu_check.sh --prepare' -- "$check" --help
expect 2 "^gpu_check.sh: unknown option '--frob'" -- "$check" --frob
expect 2 "^gpu_check.sh: --only: unknown step 'speed'" -- "$check" --only doctor,speed
expect 2 "^gpu_check.sh: option --bundle needs a value" -- "$check" --bundle
expect 2 "^gpu_check.sh: --stage: unknown stage 'speed'" -- "$check" --stage speed
expect 2 "^gpu_check.sh: give --stage or --only, not both" -- "$check" --stage core --only doctor
expect 2 "^gpu_check.sh: --time-limit: '4m' is not a whole number of seconds" -- \
  "$check" --time-limit 4m
expect 1 "no libspillway.so in $tmp" -- "$check" --prepare --from "$tmp" --bundle "$tmp/b"

# --dry-run: the GPU flow's steps and commands, nothing run, no results file.
expect 0 '^== summary' -- "$check" --dry-run --bundle "$out"
for pattern in '^== info' '^== bundle' '^== doctor' '^== gpu-tests' '^== bandwidth' '^== call-costs' \
               '^== rates' '/driver_rates --bytes 256MiB --launches 5000$' \
               'spillway run --summary [^ ]+ -- [^ ]*/driver_rates --bytes 16MiB --launches 5000' \
               '^== calibration' 'scripts/gpu_calibration.py .*--output [^ ]+/calibration-gpu\.json' \
               '^== models' 'scripts/bench_models.py --out [^ ]+ --models resnet50-b16,gpt2-b2 --factors 1.5,2 --ways ideal,managed,learned,planned --bandwidth [0-9.]+ --json [^ ]+/models-gpu\.json --gpu' \
               'scripts/gpu_call_costs.py --max-size 256MiB --repeats 5 --results [^ ]+\.jsonl' \
               '^== overhead' '^== oversubscription' '^== memsets' '^== capacity' '^== attention' \
               'spillway run --ballast --device-memory 8GiB --summary [^ ]+ -- [^ ]*/oversubscribe --bytes 17179869184 --buffer 64MiB --passes 1 --overwrite-with memset' \
               'spillway run --ballast --device-memory 8GiB --summary [^ ]+ -- [^ ]*/oversubscribe --bytes 17179869184 --buffer 64MiB --passes 1 --overwrite-with copy' \
               'spillway run --summary [^ ]+ --ballast --device-memory PEAK/1.25 --ballast-headroom MEASURED --eviction lru -- [^ ]*python[0-9]* [^ ]*/examples/pytorch/train_resnet.py' \
               'spillway run --summary [^ ]+ --ballast --device-memory PEAK/2 --ballast-headroom MEASURED --eviction none -- [^ ]*python[0-9]* [^ ]*/examples/pytorch/train_gpt.py' \
               'examples/pytorch/train_gpt.py --quiet --batch-size 8' \
               'PYTORCH_CUDA_ALLOC_CONF=backend:native [^ ]*/spillway run .*--framework-allocator' \
               'PYTORCH_CUDA_ALLOC_CONF=backend:native [^ ]*python[0-9]* [^ ]*/train_resnet.py' \
               'scripts/gpu_bandwidth.py' "$out/spillway doctor" \
               'SPILLWAY_TRACE=[^ ]*/resnet-2.trace .*/spillway run .*--mode record' \
               'spillway plan [^ ]*/resnet-2.trace --device-memory [^ ]+ -o [^ ]*/resnet-2.policy.toml' \
               'spillway run .* --policy [^ ]*/resnet-2.policy.toml --' \
               "^    \\\$ $out/attention_benchmark\$" \
               "^    \\\$ [^ ]*python[0-9]* $src/attention_kernels/benchmark/torch_compare.py\$"; do
  grep -Eq -- "$pattern" "$tmp/out" || fail "--dry-run lacks /$pattern/"
done
[[ $(tail -n 1 "$tmp/out") == attention* ]] || fail "--dry-run: the table is not last"

# --simgpu: the same flow on the simulated GPU, three steps, one size.
GPU_CHECK_JOBS=oversubscribe GPU_CHECK_FACTORS=2 SIMGPU_MEMORY=32MiB expect 0 '^oversubscription +passed' -- \
  "$check" --simgpu --quick --bundle "$out" --only doctor,oversubscription,memsets --results-dir "$tmp/r"
grep -Eq '^memsets +passed +memset: checksum 0x[0-9a-f]+, [1-9][0-9]* bytes discarded; copy: checksum 0x[0-9a-f]+, [1-9][0-9]* bytes discarded' \
  "$tmp/out" || fail "--simgpu: no passed memsets step with bytes discarded"
[[ $(tail -n 1 "$tmp/out") == memsets* ]] || fail "--simgpu: the table is not last"
results=$(ls "$tmp"/r/gpu-check-simgpu-*.md 2>/dev/null | head -n 1)
if [[ -z "$results" ]]; then
  fail "--simgpu wrote no results file"
else
  ls "$tmp"/r/gpu-check-simgpu-*.log >/dev/null 2>&1 || fail "--simgpu kept no log"
  grep -q '^| oversubscribe | 2 | lru | [0-9.]* | 0\.[0-9]* | [0-9.]* | [0-9.]* | [0-9]* MiB |$' \
    "$results" || fail "no oversubscribe lru row: $(grep '^|' "$results")"
  grep -q '^| oversubscribe | 2 | managed (spillway --eviction none) | [0-9.]* | 0\.[0-9]* | n/a | n/a |  |$' \
    "$results" || fail "no oversubscribe managed row: $(grep '^|' "$results")"
  grep -q '^| oversubscribe | 2 | planned | [0-9.]* | 0\.[0-9]* | [0-9.]* | [0-9.]* | [0-9]* MiB |$' \
    "$results" || fail "no oversubscribe planned row: $(grep '^|' "$results")"
  grep -q '^## doctor' "$results" || fail "results lack the doctor section"
  grep -q 'hooks active *yes' "$results" || fail "doctor: hooks not active: $(cat "$results")"
  grep -q 'discard on the legacy stream *refused' "$results" ||
    fail "doctor: no legacy-stream discard check: $(cat "$results")"
  grep -q 'discard of a range inside pages *whole pages of the range changed, its partial pages kept, the bytes of those pages outside it kept' \
    "$results" || fail "doctor: no partial-page discard check: $(cat "$results")"
  grep -q 'managed memory pools *yes (cuMemPoolCreate (no location) + cuMemAllocFromPoolAsync; on its memory: prefetch to the device ok, to the host ok, discard ok, advice ok)' \
    "$results" || fail "doctor: no check of what pool memory supports: $(cat "$results")"
fi
# A failing step is reported and the check goes on (a bundle whose doctor fails).
mkdir -p "$tmp/broken"
cp -a "$out"/. "$tmp/broken"/
printf '#!/bin/sh\necho "doctor: broken on purpose" >&2\nexit 1\n' >"$tmp/broken/spillway-doctor"
chmod +x "$tmp/broken/spillway-doctor"
SIMGPU_MEMORY=32MiB expect 1 '^doctor +FAILED' -- \
  "$check" --simgpu --bundle "$tmp/broken" --only doctor,bandwidth --results-dir "$tmp/r2"
grep -Eq '^bandwidth +passed' "$tmp/out" || fail "the check stopped after a failing step"

# The bundle: the build output and the libraries it needs, found through the output's own RPATH
# with no LD_LIBRARY_PATH (which would let its copies shadow a framework's own); the check's
# bundle step passes on it, and the copied libraries are listed.
# (Packed from a few files of the output: all of it takes the prepare ldd about 40 s.)
mkdir -p "$tmp/some-out"
cp -a "$out/libspillway.so" "$out/spillway-plan" "$out/spillway-wait" "$tmp/some-out/"
"$check" --prepare --from "$tmp/some-out" --bundle "$tmp/bundle" >"$tmp/out" 2>&1 ||
  fail "--prepare --from: $(tail -5 "$tmp/out")"
[[ -s "$tmp/bundle/bundled-libraries.txt" ]] || fail "--prepare listed no copied library"
outside=$(env -u LD_LIBRARY_PATH ldd "$tmp/bundle/libspillway.so" | grep ' => ' |
  grep -v -e "$tmp/bundle/" -e 'lib\(c\|m\|gcc_s\|stdc++\)\.so' || true)
[[ -z "$outside" ]] || fail "the bundle's libspillway.so finds libraries outside it: $outside"
SIMGPU_MEMORY=32MiB expect 0 '^bundle +passed +every library resolves from the bundle' -- \
  "$check" --simgpu --bundle "$tmp/bundle" --only bundle --results-dir "$tmp/r4"

# Stages for a short lease: core leaves the link's figures in the results folder and a later stage
# takes them; a stage whose time limit runs out keeps the results of what ran, and says what did
# not.
# (build/out is no bundle: its bundle step fails here, the rest of the stage passes.)
SIMGPU_H2D_GBPS=41 SIMGPU_MEMORY=32MiB "$check" --simgpu --bundle "$out" --stage core \
  --results-dir "$tmp/r3" >"$tmp/out" 2>&1
for step in info doctor bandwidth call-costs rates calibration; do
  grep -Eq "^$step +passed" "$tmp/out" || fail "--stage core: $step did not pass: $(tail -8 "$tmp/out")"
done
grep -Eq '^(overhead|gpu-tests|attention) ' "$tmp/out" && fail "--stage core ran another stage's steps"
grep -q '"h2d_gbps": 41' "$tmp/r3/link-simgpu.json" || fail "--stage core left no link figures"
# call-costs: every figure a JSON line in the results folder, and a row of the results table.
costs=$(find "$tmp/r3" -name 'gpu-call-costs-simgpu-*.jsonl' | head -n 1)
[[ -n "$costs" ]] && grep -q '"op": "prefetch_to_device", "bytes": 1048576, "blocked_us"' "$costs" ||
  fail "call-costs: no figures in $tmp/r3: $(ls "$tmp/r3")"
grep -q '^| prefetch_to_host | 65536 |' "$tmp"/r3/gpu-check-simgpu-*.md ||
  fail "call-costs: no table row in the results"
[[ -n "$costs" ]] && [[ $(grep -c '"op": "discard"' "$costs") -eq 2 ]] || fail "call-costs: not 2 discard sizes"
# calibration: the link's figures and a fitted cost per call, in a file simgpu and the simulator
# read.
cal="$tmp/r3/calibration-simgpu.json"
grep -q '"h2d_bytes_per_s": 41000000000.0' "$cal" && grep -q '"prefetch_to_host": {' "$cal" ||
  fail "calibration: no link figure or call cost in $cal: $(cat "$cal" 2>&1)"
# rates: simgpu's fault batch (SIMGPU_FAULT_BATCH_US, 30 by default) measured back, and a launch's
# cost with and without spillway.
grep -q '"hook_us_per_launch": ' "$tmp/r3/rates-simgpu.json" ||
  fail "rates: no rates-simgpu.json: $(cat "$tmp/r3/rates-simgpu.json" 2>&1)"
"$python" -c 'import json, sys
c = json.load(open(sys.argv[1]))
assert abs(c["faults"]["batch_seconds"] - 30e-6) < 1e-9, c["faults"]
assert c["calls"]["launch"]["seconds"] > 0, c["calls"]' "$cal" ||
  fail "calibration: not simgpu's fault batch, or no launch cost: $(cat "$cal")"
"$out/spillway-simulate" --synthetic cnn-small --oversubscription 2 --calibration "$cal" \
  >"$tmp/sim" 2>&1 || fail "calibration: spillway-simulate refuses $cal: $(tail -3 "$tmp/sim")"
SIMGPU_MEMORY=32MiB GPU_CHECK_JOBS=oversubscribe GPU_CHECK_FACTORS=2 expect 1 \
  '^link: H2D 41 GB/s, D2H 53 GB/s, from ' -- \
  "$check" --simgpu --bundle "$out" --stage frameworks --time-limit 12 --results-dir "$tmp/r3"
grep -q 'the time limit (--time-limit 12) left no time for' "$tmp"/r3/gpu-check-simgpu-*.log ||
  fail "--time-limit: nothing said of what did not run: $(tail -5 "$tmp/out")"
grep -q '^## overhead' "$tmp"/r3/gpu-check-simgpu-*.md || fail "--time-limit: no partial results"

# scripts/gpu_bandwidth.py through the driver API, here simgpu's: every figure, the small managed
# allocation's footprint as simgpu charges it (96 KiB: its pages, not a 2 MiB chunk), the driver's
# version; without a driver, exit 3 and one line.
LD_LIBRARY_PATH="$out/simgpu" SIMGPU_MEMORY=256MiB expect 0 '^result: ' -- \
  "$python" "$src/scripts/gpu_bandwidth.py" --size-mib 4 --repeats 2
for key in h2d_pinned_gbps d2h_pinned_gbps h2d_pageable_gbps d2h_pageable_gbps h2d_prefetch_gbps \
           d2h_prefetch_gbps small_managed_stride_kib driver_version; do
  grep -q "^result: .*\"$key\": [0-9]" "$tmp/out" || fail "gpu_bandwidth.py: no $key: $(cat "$tmp/out")"
done
grep -q '^result: .*"small_managed_device_kib": 96.0' "$tmp/out" ||
  fail "gpu_bandwidth.py: a 96 KiB managed allocation does not take 96 KiB: $(cat "$tmp/out")"
LD_LIBRARY_PATH="$tmp/none" expect 3 '^gpu_bandwidth.py: no CUDA driver: ' -- \
  "$python" "$src/scripts/gpu_bandwidth.py" --size-mib 4

# scripts/gpu_calibration.py: the fit (a fixed part and a part per byte, advise halved), and one
# line for each kind of bad input.
cal_py="$src/scripts/gpu_calibration.py"
printf '%s\n' '{"op": "prefetch_to_device", "bytes": 1048576, "blocked_us": 12.0, "complete_us": 40}' \
  '{"op": "prefetch_to_device", "bytes": 3145728, "blocked_us": 16.0}' \
  '{"op": "advise", "bytes": 65536, "calls": 2, "blocked_us": 3.0}' \
  '{"op": "discard", "bytes": 65536, "error": "no cuMemDiscardBatchAsync"}' >"$tmp/costs.jsonl"
expect 0 '^wrote ' -- "$python" "$cal_py" --call-costs "$tmp/costs.jsonl" -o "$tmp/cal.json"
"$python" - "$tmp/cal.json" <<'PY' || fail "gpu_calibration.py: wrong fit: $(cat "$tmp/cal.json")"
import json, sys
c = json.load(open(sys.argv[1]))["calls"]
p = c["prefetch_to_device"]
assert abs(p["seconds"] - 10e-6) < 1e-12 and abs(p["seconds_per_byte"] - 2e-6 / 1048576) < 1e-18, p
assert abs(c["advise"]["seconds"] - 1.5e-6) < 1e-12 and "discard" not in c, c
PY
expect 2 "^gpu_calibration.py: call costs $tmp/nope.jsonl: cannot be read" -- \
  "$python" "$cal_py" --call-costs "$tmp/nope.jsonl" -o "$tmp/cal.json"
echo '{"op": "advise", "blocked_us": -1}' >"$tmp/bad.jsonl"
expect 2 'line 1: blocked_us -1 or bytes 0 is not a measurement' -- \
  "$python" "$cal_py" --call-costs "$tmp/bad.jsonl" -o "$tmp/cal.json"
echo '{"h2d_gbps": "fast"}' >"$tmp/link.json"
expect 2 "link figures $tmp/link.json: h2d_gbps 'fast' is not a bandwidth" -- \
  "$python" "$cal_py" --link "$tmp/link.json" -o "$tmp/cal.json"
echo '{}' >"$tmp/link.json"
expect 1 '^gpu_calibration.py: nothing measured to write' -- \
  "$python" "$cal_py" --link "$tmp/link.json" -o "$tmp/cal.json"
expect 2 'is one of the inputs' -- "$python" "$cal_py" --link "$tmp/link.json" -o "$tmp/link.json"

finish "gpu_check"
