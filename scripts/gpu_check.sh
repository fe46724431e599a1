#!/usr/bin/env bash
# The GPU check: one command that measures spillway on a real GPU and writes a results file.
# Two halves, because the GPU machine has no network and no Debian packages:
#   scripts/gpu_check.sh --prepare     here: build with CUDA (sm_90) and pack build output plus the
#                                      shared libraries it needs into a bundle folder (< 64 MiB)
#   scripts/gpu_check.sh               there: run the steps against the bundle and write
#                                      docs/results/gpu-check-<date>.md and its full log
# --dry-run lists the steps and commands; --simgpu runs the same flow on the simulated GPU with
# the driver-API examples, so the script's logic is tested without a GPU. See docs/gpu-check.md.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prog=gpu_check.sh

all_steps=(info bundle doctor gpu-tests bandwidth call-costs rates calibration models overhead
           oversubscription memsets capacity attention)

usage() {
  cat <<EOF
usage: scripts/gpu_check.sh --prepare [--from OUT_DIR] [--bundle DIR] [--build-dir DIR]
       scripts/gpu_check.sh [--bundle DIR] [--simgpu] [--dry-run] [--quick] [--only STEP,...]
                            [--stage NAME] [--time-limit SECONDS] [--results-dir DIR]

--prepare           build with CUDA for sm_90 (in --build-dir, default build-gpu/) and pack
                    build/out plus the shared libraries it needs into the bundle folder
  --from OUT_DIR    pack an existing build output folder instead of building
--bundle DIR        the bundle (default: build-gpu-bundle/, else build/out/)
--simgpu            run the flow on simgpu with the driver-API examples (tests the script)
--dry-run           list the steps and the commands they would run; run nothing
--quick             fewer steps per run and smaller searches (about a third of the time)
--only STEPS        run only these steps (comma-separated): ${all_steps[*]}
--stage NAME        run one stage, for a short lease (docs/gpu-check.md): core (info, bundle,
                    doctor, bandwidth, call-costs, rates, calibration), models (models),
                    frameworks (overhead, oversubscription, memsets, capacity) or attention
                    (gpu-tests, attention); a later stage takes the link bandwidth an earlier
                    one left in the results folder
--time-limit S      stop starting commands S seconds after the start (each command's own limit is
                    cut to what is left), so the results of what ran are written before a lease's
                    limit ends the run
--results-dir DIR   where the results file and log go (default docs/results/; with --simgpu a
                    temporary folder)
Exit status: 0 when every step passed or was skipped, 1 when a step failed, 2 on bad usage.
EOF
}

die_usage() {
  echo "$prog: $1" >&2
  exit 2
}

prepare=0 from="" bundle="" build_dir="$root/build-gpu" simgpu=0 dry=0 quick=0 only=""
results_dir="" stage="" time_limit=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --prepare) prepare=1; shift ;;
    --from) [[ $# -ge 2 ]] || die_usage "option --from needs a value"; from=$2; shift 2 ;;
    --bundle) [[ $# -ge 2 ]] || die_usage "option --bundle needs a value"; bundle=$2; shift 2 ;;
    --build-dir) [[ $# -ge 2 ]] || die_usage "option --build-dir needs a value"
                 build_dir=$2; shift 2 ;;
    --simgpu) simgpu=1; shift ;;
    --dry-run) dry=1; shift ;;
    --quick) quick=1; shift ;;
    --only) [[ $# -ge 2 ]] || die_usage "option --only needs a value"; only=$2; shift 2 ;;
    --results-dir) [[ $# -ge 2 ]] || die_usage "option --results-dir needs a value"
                   results_dir=$2; shift 2 ;;
    --stage) [[ $# -ge 2 ]] || die_usage "option --stage needs a value"; stage=$2; shift 2 ;;
    --time-limit) [[ $# -ge 2 ]] || die_usage "option --time-limit needs a value"
                  [[ "$2" =~ ^[1-9][0-9]*$ ]] ||
                    die_usage "--time-limit: '$2' is not a whole number of seconds"
                  time_limit=$2; shift 2 ;;
    *) die_usage "unknown option '$1' (see --help)" ;;
  esac
done
if [[ -n "$stage" ]]; then
  [[ -z "$only" ]] || die_usage "give --stage or --only, not both"
  case "$stage" in
    core) only=info,bundle,doctor,bandwidth,call-costs,rates,calibration ;;
    models) only=models ;;
    frameworks) only=overhead,oversubscription,memsets,capacity ;;
    attention) only=gpu-tests,attention ;;
    *) die_usage "--stage: unknown stage '$stage' (stages: core, models, frameworks, attention)" ;;
  esac
fi
if [[ -n "$only" ]]; then
  IFS=, read -r -a wanted <<<"$only"
  for s in "${wanted[@]}"; do
    [[ " ${all_steps[*]} " == *" $s "* ]] || die_usage "--only: unknown step '$s' (steps: ${all_steps[*]})"
  done
fi

# ---------------------------------------------------------------------------------------------
# The bundle: build output + the non-system shared libraries it needs, checked with ldd.

# Libraries every Linux machine with a CUDA driver has; never copied (copying libstdc++ would
# shadow a newer one that the frameworks need). libcuda is the driver itself.
is_system_lib() {
  case "${1##*/}" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*|\
    libcuda.so*|linux-vdso*|libresolv.so*|libutil.so*) return 0 ;;
  esac
  return 1
}

# Prints the ELF files of a folder (not its simgpu/ subfolder: the bundle checks those apart).
elf_files() {
  local f
  for f in "$1"/*; do
    [[ -f "$f" && ! -L "$f" ]] || continue
    [[ "$(head -c 4 "$f" 2>/dev/null | od -An -c | tr -d ' ')" == '177ELF' ]] && echo "$f"
  done
}

# check_bundle DIR: every dependency of every ELF of the build output in DIR that is not a system
# library resolves to a file inside DIR, through the build output's own RPATH ($ORIGIN) and with
# no LD_LIBRARY_PATH, as the check and the jobs run them. The libraries --prepare copied in
# (listed in DIR/bundled-libraries.txt) are checked as those files' dependencies. A bundle made
# before that list existed is checked with LD_LIBRARY_PATH=DIR. Prints one line per missing
# library; returns 1 when there is one.
check_bundle() {
  local dir f line lib path copied="" search=()
  dir=$(cd "$1" && pwd)
  if [[ -f "$dir/bundled-libraries.txt" ]]; then
    copied=" $(tr '\n' ' ' <"$dir/bundled-libraries.txt")"
    search=(env -u LD_LIBRARY_PATH)
  else
    search=(env "LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  fi
  while read -r f; do
    [[ "$copied" == *" ${f##*/} "* ]] && continue
    while read -r line; do
      lib=${line%% *}
      if [[ "$line" == *"not found"* ]]; then
        is_system_lib "$lib" && [[ "$lib" == libcuda.so* ]] && continue  # no driver here
        echo "ldd: $lib: not found (needed by ${f##*/})"
        continue
      fi
      [[ "$line" == *" => "* ]] || continue
      path=${line#* => }
      path=${path%% (*}
      is_system_lib "$lib" && continue
      if [[ "$(readlink -f "$path")" != "$dir"/* ]]; then
        echo "ldd: $lib: resolves outside the bundle to $path (needed by ${f##*/})"
      fi
    done < <("${search[@]}" ldd "$f" 2>&1 | sed 's/^[[:space:]]*//')
  done < <(elf_files "$dir") | awk '!seen[$2]++' | grep .
  [[ ${PIPESTATUS[2]} -ne 0 ]]  # grep found no line: no problem
}

do_prepare() {
  local out=$from
  [[ -n "$bundle" ]] || bundle="$root/build-gpu-bundle"
  if [[ -z "$out" ]]; then
    command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] ||
      { echo "$prog: --prepare: nvcc not found (needed to build the CUDA kernels)" >&2; exit 1; }
    export PATH="$PATH:/usr/local/cuda/bin"
    local generator=()
    command -v ninja >/dev/null && generator=(-G Ninja)
    echo "== configure $build_dir (CUDA on, sm_90, RelWithDebInfo)"
    cmake -S "$root" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DSPILLWAY_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null || exit 1
    echo "== build (this takes a while on few cores)"
    cmake --build "$build_dir" -j "$(nproc)" || exit 1
    out="$build_dir/out"
  fi
  [[ -f "$out/libspillway.so" ]] || { echo "$prog: --prepare: no libspillway.so in $out" >&2; exit 1; }
  echo "== pack $out into $bundle"
  rm -rf "$bundle"
  mkdir -p "$bundle"
  cp -a "$out"/. "$bundle"/
  # The dependencies that are not system libraries (Abseil, gtest, benchmark, libunwind, cudart).
  local f line lib path copied=()
  while read -r f; do
    while read -r line; do
      [[ "$line" == *" => /"* ]] || continue
      lib=${line%% *}
      path=${line#* => }
      path=${path%% (*}
      is_system_lib "$lib" && continue
      [[ "$(readlink -f "$path")" == "$(cd "$bundle" && pwd)"/* ]] && continue
      if [[ ! -e "$bundle/$lib" ]]; then
        cp -L "$path" "$bundle/$lib"
        copied+=("$lib")
      fi
    done < <(LD_LIBRARY_PATH="$bundle" ldd "$f" 2>/dev/null | sed 's/^[[:space:]]*//')
  done < <(elf_files "$bundle")
  # libunwind is dlopen()ed by libspillway (never linked): ldd cannot see it.
  for lib in libunwind.so.8 libunwind-x86_64.so.8 liblzma.so.5; do
    if [[ ! -e "$bundle/$lib" ]]; then
      path=$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')
      [[ -n "$path" ]] && cp -L "$path" "$bundle/$lib" && copied+=("$lib")
    fi
  done
  # A second pass: the copied libraries' own dependencies (Abseil's libraries need each other).
  local round
  for round in 1 2; do
    while read -r f; do
      while read -r line; do
        [[ "$line" == *" => /"* ]] || continue
        lib=${line%% *}
        path=${line#* => }
        path=${path%% (*}
        is_system_lib "$lib" && continue
        [[ -e "$bundle/$lib" ]] && continue
        cp -L "$path" "$bundle/$lib"
        copied+=("$lib")
      done < <(LD_LIBRARY_PATH="$bundle" ldd "$f" 2>/dev/null | sed 's/^[[:space:]]*//')
    done < <(elf_files "$bundle")
    [[ $round -eq 1 ]] || break
  done
  # Debug information is most of the size; the check needs symbols only.
  while read -r f; do
    chmod u+w "$f"
    strip --strip-debug "$f" 2>/dev/null || true
  done < <(elf_files "$bundle"; [[ -d "$bundle/simgpu" ]] && elf_files "$bundle/simgpu")
  echo "copied ${#copied[@]} libraries: ${copied[*]}"
  printf '%s\n' "${copied[@]}" >"$bundle/bundled-libraries.txt"
  local problems
  problems=$(check_bundle "$bundle")
  if [[ -n "$problems" ]]; then
    echo "$problems"
    echo "$prog: --prepare: the bundle does not resolve its libraries" >&2
    exit 1
  fi
  local bytes
  bytes=$(du -sb "$bundle" | cut -f1)
  echo "bundle $bundle: $((bytes / 1048576)) MiB ($bytes bytes), every library resolves (ldd)"
  if ((bytes > 64 * 1048576)); then
    echo "$prog: --prepare: the bundle is over the 64 MiB a carry can take" >&2
    exit 1
  fi
  echo "carry it to the GPU machine (relative path): ${bundle#"$root"/}"
}

if [[ $prepare -eq 1 ]]; then
  do_prepare
  exit 0
fi

# ---------------------------------------------------------------------------------------------
# The check.

if [[ -z "$bundle" ]]; then
  for candidate in "$root/build-gpu-bundle" "$root/build/out"; do
    [[ -f "$candidate/libspillway.so" ]] && { bundle=$candidate; break; }
  done
fi
if [[ -z "$bundle" || ! -f "$bundle/libspillway.so" ]]; then
  if [[ $dry -eq 1 ]]; then
    bundle=${bundle:-$root/build-gpu-bundle}
  else
    echo "$prog: no bundle with libspillway.so (looked in build-gpu-bundle/ and build/out/);" \
         "make one with scripts/gpu_check.sh --prepare, or pass --bundle DIR" >&2
    exit 1
  fi
fi
bundle=$(cd "$bundle" 2>/dev/null && pwd || echo "$bundle")
# The bundle's launcher (a program built with it, launcher/), finding libspillway.so next to
# itself, else in the bundle through SPILLWAY_HOME.
spillway=("$bundle/spillway")
export SPILLWAY_HOME="$bundle"

stamp=$(date -u +%Y%m%d-%H%M%S)
if [[ -z "$results_dir" ]]; then
  if [[ $simgpu -eq 1 ]]; then results_dir=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
  else results_dir="$root/docs/results"; fi
fi
mkdir -p "$results_dir"
kind=$([[ $simgpu -eq 1 ]] && echo simgpu || echo gpu)
results="$results_dir/gpu-check-$kind-$stamp.md"
log="$results_dir/gpu-check-$kind-$stamp.log"
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-work.XXXXXX")
trap 'rm -rf "$work"' EXIT
[[ $dry -eq 1 ]] && { results=/dev/null; log=/dev/null; }

# The bundle's programs and libraries find what they need beside them through their RPATH; the
# bundle is not put on LD_LIBRARY_PATH, where its copies would shadow a framework's own. simgpu
# mode puts the simulator's libcuda.so.1 first.
if [[ $simgpu -eq 1 ]]; then
  export LD_LIBRARY_PATH="$bundle/simgpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export SIMGPU_MEMORY=${SIMGPU_MEMORY:-128MiB}
fi
python=$(command -v python3 || command -v python || echo python3)
sim_bytes=$("$python" -c 'import re,sys
m = re.fullmatch(r"\s*([0-9.]+)\s*([kmgt]?)(i?b)?\s*", sys.argv[1].lower())
print(int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2) or " ")) if m else 0)' "${SIMGPU_MEMORY:-0}")
run_memory=""
steps_per_run=$([[ $quick -eq 1 ]] && echo 8 || echo 20)
run_timeout=${GPU_CHECK_TIMEOUT:-300}

say() { echo "$*" | tee -a "$log"; }
note() { say "  note: $*"; notes+=("$current_step: $*"); }
md() { [[ $dry -eq 1 ]] || echo "$*" >>"$results"; }

commands=() notes=() table=()
# runc NAME CMD...: runs CMD (with a timeout) and keeps its output in $work/NAME.out, appending
# both to the log; records the command. Under --dry-run only prints it. Returns CMD's status.
runc() {
  local name=$1 rc=0
  shift
  commands+=("$*")
  if [[ $dry -eq 1 ]]; then
    echo "    \$ $*"
    : >"$work/$name.out"
    return 0
  fi
  echo "\$ $*" >>"$log"
  local limit=$run_timeout
  if ((time_limit > 0)); then
    local left=$((time_limit - SECONDS))
    if ((left < 10)); then
      note "the time limit (--time-limit $time_limit) left no time for: $*"
      : >"$work/$name.out"
      return 124
    fi
    ((left - 5 < limit)) && limit=$((left - 5))
  fi
  timeout --kill-after=5 "$limit" "$@" >"$work/$name.out" 2>&1 || rc=$?
  cat "$work/$name.out" >>"$log"
  echo "(exit $rc)" >>"$log"
  return $rc
}

# result NAME KEY: KEY from the last `result: {json}` line of run NAME (empty if none).
result() {
  grep '^result: ' "$work/$1.out" 2>/dev/null | tail -n 1 | sed 's/^result: //' |
    "$python" -c 'import json,sys
t = sys.stdin.read().strip()
v = json.loads(t).get(sys.argv[1], "") if t else ""
print(v)' "$2" 2>/dev/null
}
# calc EXPR: awk arithmetic (with max(a, b)); integers print without a fraction.
calc() {
  awk "function max(a, b) { return a > b ? a : b }
       BEGIN { x = $1; if (x == int(x)) printf \"%.0f\\n\", x; else printf \"%.6g\\n\", x }" \
    2>/dev/null
}
fmt() { [[ -n "$1" ]] && printf '%.*f' "${2:-2}" "$1" || echo "n/a"; }

current_step="" step_failed=0
# step NAME TITLE: runs step_NAME unless --only leaves it out; a failing step is reported and
# the check goes on.
run_step() {
  local name=$1 title=$2 status
  if [[ -n "$only" && ",$only," != *",$name,"* ]]; then return 0; fi
  current_step=$name
  say ""
  say "== $name: $title"
  md ""
  md "## $name: $title"
  md ""
  local fn="step_${name//-/_}"
  "$fn"
  status=$?
  case $status in
    0) status=passed ;;
    3) status=skipped ;;
    *) status=FAILED; step_failed=1 ;;
  esac
  [[ $dry -eq 1 ]] && { status="dry-run"; step_failed=0; }
  say "-- $name: $status"
  md ""
  md "Status: **$status**"
  table+=("$(printf '%-17s %-8s %s' "$name" "$status" "${step_summary:-}")")
  step_summary=""
}
SKIP=3

# Runs a job plainly or under spillway; sets job_ms (time per step) and job_summary. Jobs:
#   GPU:    resnet | gpt (PyTorch examples) | flax;  BATCH = batch size
#   simgpu: oversubscribe | train_like (driver API); BATCH = size factor of the device memory
# job NAME KIND BATCH [spillway-run options...]  ("plain" as the first option: no spillway)
job_ms="" job_peak="" job_pre="" job_evi="" job_outside="" job_summary="" job_rc=0
# Put before every job's command, with and without spillway (e.g. env VAR=value): the same
# allocator on both sides of a comparison. spillway run keeps a variable set this way.
job_env=()
job_args=()  # extra arguments of the framework examples
job() {
  local name=$1 kind=$2 batch=$3
  shift 3
  local cmd=() wrap=() stats="$work/$name.stats.json"
  local simenv=(env "SIMGPU_STATS=$stats" "SIMGPU_MEMORY=${run_memory:-${SIMGPU_MEMORY:-}}")
  job_summary="$work/$name.summary.json"
  rm -f "$job_summary" "$stats"
  if [[ "${1:-}" == plain ]]; then
    shift
  else
    wrap=("${spillway[@]}" run --summary "$job_summary" "$@" --)
    [[ $simgpu -eq 1 ]] && wrap=("${spillway[@]}" run --simgpu --summary "$job_summary" "$@" --)
  fi
  case $kind in
    resnet) cmd=("$python" "$root/examples/pytorch/train_resnet.py" --quiet --depth 50
                 --batch-size "$batch" --steps "$steps_per_run" "${job_args[@]}") ;;
    gpt) cmd=("$python" "$root/examples/pytorch/train_gpt.py" --quiet --batch-size "$batch"
              --steps "$steps_per_run") ;;
    flax) cmd=("$python" "$root/examples/jax/train_flax.py" --quiet --batch-size "$batch"
               --steps "$steps_per_run") ;;
    # simgpu: the job's size is BATCH x SIMGPU_MEMORY whatever device it runs on (run_memory
    # gives the unlimited runs a device large enough).
    oversubscribe) cmd=("${simenv[@]}" "$bundle/oversubscribe" --bytes
                        "$(calc "int($batch * $sim_bytes)")" --buffer 4MiB --passes 4) ;;
    train_like) cmd=("${simenv[@]}" "$bundle/train_like" --oversubscription "$batch"
                     --memory "$SIMGPU_MEMORY" --steps 4) ;;
    train_like_managed) cmd=("${simenv[@]}" "$bundle/train_like" --managed
                             --oversubscription "$batch" --memory "$SIMGPU_MEMORY" --steps 4) ;;
  esac
  job_rc=0
  runc "$name" "${job_env[@]}" "${wrap[@]}" "${cmd[@]}" || job_rc=$?
  # What the run reports, read in one go: time per step (the result line; on simgpu the virtual
  # clock over its 4 passes/steps), the job's peak, and the engine's moves from its summary.
  local fields
  fields=$("$python" - "$work/$name.out" "$stats" "$job_summary" <<'EOF' 2>/dev/null
import json, sys
def load(path):
    try:
        return json.load(open(path))
    except Exception:
        return {}
result = {}
try:
    for line in open(sys.argv[1]):
        if line.startswith("result: "):
            result = json.loads(line[len("result: "):])
except Exception:
    pass
stats, summary = load(sys.argv[2]), load(sys.argv[3])
engine = summary.get("engine", {}) if isinstance(summary.get("engine"), dict) else {}
ms = result.get("median_step_ms")
if ms is None and "virtual_seconds" in stats:
    ms = stats["virtual_seconds"] * 1000 / 4
values = [ms, result.get("max_memory_allocated"), engine.get("prefetch_bytes"),
          engine.get("evict_bytes"), result.get("outside_allocator_bytes")]
print(" ".join("-" if v is None else str(v) for v in values))
EOF
)
  read -r job_ms job_peak job_pre job_evi job_outside <<<"${fields:-- - - - -}"
  [[ "$job_ms" == - || $job_rc -ne 0 ]] && job_ms=""
  [[ "$job_peak" == - ]] && job_peak=""
  [[ "$job_pre" == - ]] && job_pre=""
  [[ "$job_evi" == - ]] && job_evi=""
  [[ "$job_outside" == - ]] && job_outside=""
  return $job_rc
}

# ---- the steps

step_info() {
  say "  date: $(date -u '+%Y-%m-%d %H:%M UTC'), host: $(hostname), commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  md "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); host: \`$(hostname)\`; commit: \`$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)\`"
  if [[ $simgpu -eq 1 ]]; then
    device="simgpu ($SIMGPU_MEMORY)"
    driver="simgpu"
  elif runc nvidia-smi nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; then
    device=$(cut -d, -f1 "$work/nvidia-smi.out" | head -n 1)
    driver=$(cut -d, -f2 "$work/nvidia-smi.out" | head -n 1 | tr -d ' ')
    md "- GPU: $(head -n 1 "$work/nvidia-smi.out")"
  else
    note "nvidia-smi failed: no GPU visible"
    device="unknown" driver="unknown"
  fi
  step_summary="$device, driver $driver"
  md "- device: $device; driver: $driver; bundle: \`${bundle#"$root"/}\`"
  local versions
  versions=$("$python" - <<'EOF' 2>/dev/null
import importlib
out = []
for m in ("torch", "torchvision", "jax", "flax", "cupy", "tensorflow"):
    try:
        out.append(f"{m} {importlib.import_module(m).__version__}")
    except Exception:
        out.append(f"{m} absent")
print(", ".join(out))
EOF
)
  say "  python: ${versions:-python absent}"
  md "- python: $("$python" --version 2>&1); ${versions:-}"
  return 0
}

step_bundle() {
  [[ $dry -eq 1 ]] && { echo "    (ldd every ELF in $bundle; all non-system libraries from it)"; return 0; }
  local problems
  problems=$(check_bundle "$bundle")
  if [[ -n "$problems" ]]; then
    say "$problems"
    md '```'; md "$problems"; md '```'
    step_summary="libraries missing (see log)"
    return 1
  fi
  step_summary="every library resolves from the bundle"
  say "  $step_summary"
  return 0
}

step_doctor() {
  local args=()
  [[ $simgpu -eq 1 ]] && args=(--simgpu)
  runc doctor "${spillway[@]}" doctor "${args[@]}"
  local rc=$?
  md '```'; md "$(cat "$work/doctor.out")"; md '```'
  [[ $dry -eq 1 ]] && return 0
  sed 's/^/  /' "$work/doctor.out"
  local managed pools
  managed=$(grep -m1 '^managed memory ' "$work/doctor.out" | sed 's/^managed memory *//')
  pools=$(grep -m1 '^managed memory pools' "$work/doctor.out" | sed 's/^managed memory pools *//')
  step_summary="managed: ${managed%% *}, pools: ${pools%% *}, prefetch batch: $(grep -m1 '^cuMemPrefetchBatchAsync' "$work/doctor.out" | awk '{print $2}')"
  return $rc
}

step_gpu_tests() {
  if [[ $simgpu -eq 1 ]]; then
    note "the gpu-labelled tests need a real GPU (they run under plain ctest -L gpu there)"
    return $SKIP
  fi
  # ctest cannot run from a carried build folder (its paths are this machine's): run the
  # gpu-labelled gtest binaries (*_gpu_test) directly.
  local t rc=0 passed=0 failed=0 any=0
  for t in "$bundle"/*_gpu_test; do
    [[ -x "$t" ]] || continue
    any=1
    if runc "${t##*/}" "$t" --gtest_brief=1; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1)); rc=1
    fi
    md "- \`${t##*/}\`: $(grep -E '^\[  (PASSED|FAILED)' "$work/${t##*/}.out" | tr '\n' ' ')"
  done
  ((any)) || { note "no *_gpu_test binary in the bundle"; return $SKIP; }
  step_summary="$passed binaries passed, $failed failed"
  return $rc
}

# The link's figures, for a later stage's bounds (--stage frameworks), in the results folder.
keep_link() {
  [[ $dry -eq 0 && -n "$h2d_gbps" && -n "$d2h_gbps" ]] || return 0
  echo "{\"h2d_gbps\": $h2d_gbps, \"d2h_gbps\": $d2h_gbps}" >"$results_dir/link-$kind.json"
}

step_bandwidth() {
  h2d_gbps="" d2h_gbps=""
  if [[ $simgpu -eq 1 ]]; then
    h2d_gbps=${SIMGPU_H2D_GBPS:-45}
    d2h_gbps=${SIMGPU_D2H_GBPS:-53}
    note "simgpu: the configured link (SIMGPU_H2D_GBPS / SIMGPU_D2H_GBPS), not a measurement"
    step_summary="H2D $h2d_gbps GB/s, D2H $d2h_gbps GB/s (configured)"
    keep_link
    return 0
  fi
  runc bandwidth "$python" "$root/scripts/gpu_bandwidth.py" || {
    note "bandwidth measurement failed (through the driver API: libcuda.so.1)"; return 1; }
  # The bound uses managed-memory prefetch rates (how spillway moves data) when measured, else
  # pinned copies.
  h2d_gbps=$(result bandwidth h2d_prefetch_gbps)
  d2h_gbps=$(result bandwidth d2h_prefetch_gbps)
  [[ -n "$h2d_gbps" ]] || h2d_gbps=$(result bandwidth h2d_pinned_gbps)
  [[ -n "$d2h_gbps" ]] || d2h_gbps=$(result bandwidth d2h_pinned_gbps)
  md '```'; md "$(grep -v '^result:' "$work/bandwidth.out")"; md '```'
  keep_link
  step_summary="H2D $(fmt "$h2d_gbps" 1) GB/s, D2H $(fmt "$d2h_gbps" 1) GB/s (pinned)"
  [[ -n "$h2d_gbps" ]]
}

# What each driver call the engine makes costs (scripts/gpu_call_costs.py): blocked and
# complete times by size, each figure a JSON line in the results folder as soon as measured.
step_call_costs() {
  local max=256MiB repeats=5 file="$results_dir/gpu-call-costs-$kind-$stamp.jsonl"
  [[ $quick -eq 1 ]] && max=16MiB
  if [[ $simgpu -eq 1 ]]; then
    max=1MiB repeats=2
    note "simgpu: the host time of simgpu's calls, not a GPU's"
  fi
  runc call-costs "$python" "$root/scripts/gpu_call_costs.py" --max-size "$max" \
    --repeats "$repeats" --results "$file" || { note "per-call costs failed (through the driver API: libcuda.so.1)"; return 1; }
  [[ $dry -eq 1 ]] && return 0
  md "| call | bytes | blocked (µs) | complete (µs) |"
  md "| --- | --- | --- | --- |"
  local line
  while IFS= read -r line; do md "$line"; done < <("$python" -c 'import json,sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print("| %s | %s | %s | %s |" % (r["op"], r.get("bytes", "-"), r.get("blocked_us", r.get("error", "-")),
                                     r.get("complete_us", "-")))' "$file")
  step_summary="$(wc -l <"$file") figures in $(basename "$file")"
}

# Demand faults and launches (examples/driver_rates.cc), without and with spillway: the fault
# batch and a launch's cost for the calibration, and the hook's cost per launch (the difference),
# kept in the results folder as rates-KIND.json.
step_rates() {
  local bytes=256MiB small=16MiB launches=5000 simenv=() wrap=(run)
  if [[ $simgpu -eq 1 ]]; then
    bytes=16MiB small=4MiB launches=500
    simenv=(env "SIMGPU_MEMORY=${SIMGPU_MEMORY:-64MiB}")
    wrap=(run --simgpu)
    note "simgpu: the fault batch is simgpu's SIMGPU_FAULT_BATCH_US and a launch's host time simgpu's, not a GPU's"
  fi
  runc rates "${simenv[@]}" "$bundle/driver_rates" --bytes "$bytes" --launches "$launches" ||
    { note "rates: driver_rates failed (see the log)"; return 1; }
  runc rates-spillway "${spillway[@]}" "${wrap[@]}" --summary "$work/rates.summary.json" -- \
    "$bundle/driver_rates" --bytes "$small" --launches "$launches" ||
    { note "rates: driver_rates under spillway failed (see the log)"; return 1; }
  [[ $dry -eq 1 ]] && return 0
  md '```'; md "$(grep -v '^result:' "$work/rates.out")"; md '```'
  local batch plain hooked
  batch=$(result rates fault_batch_us)
  plain=$(result rates launch_host_us)
  hooked=$(result rates-spillway launch_host_us)
  [[ -n "$batch" && -n "$plain" && -n "$hooked" ]] || { note "rates: no result line"; return 1; }
  "$python" -c 'import json, sys
result = {}
for line in open(sys.argv[1]):
    if line.startswith("result: "):
        result = json.loads(line[len("result: "):])
result["launch_host_us_with_spillway"] = float(sys.argv[2])
result["hook_us_per_launch"] = float(sys.argv[2]) - result["launch_host_us"]
with open(sys.argv[3], "w") as f:
    f.write(json.dumps(result) + "\n")' "$work/rates.out" "$hooked" "$results_dir/rates-$kind.json"
  md "- launch: $(fmt "$plain" 2) µs without spillway, $(fmt "$hooked" 2) µs with it (the calling thread's time per \`cuLaunchKernel\`)"
  step_summary="fault batch $(fmt "$batch" 1) µs per 2 MiB; launch $(fmt "$plain" 2) µs, $(fmt "$hooked" 2) µs with spillway"
}

# The calibration file (docs/calibration.md) from this run's link figures, call costs and
# bandwidth results, for SIMGPU_CALIBRATION and `spillway simulate --calibration`.
step_calibration() {
  local file="$results_dir/calibration-$kind.json" costs args=()
  costs="$results_dir/gpu-call-costs-$kind-$stamp.jsonl"
  [[ -f "$costs" ]] || costs=$(ls -t "$results_dir"/gpu-call-costs-"$kind"-*.jsonl 2>/dev/null | head -n 1)
  [[ -f "$results_dir/link-$kind.json" ]] && args+=(--link "$results_dir/link-$kind.json")
  [[ -n "$costs" ]] && args+=(--call-costs "$costs")
  [[ -s "$work/bandwidth.out" ]] && args+=(--bandwidth "$work/bandwidth.out")
  [[ -f "$results_dir/rates-$kind.json" ]] && args+=(--rates "$results_dir/rates-$kind.json")
  if ((${#args[@]} == 0)) && [[ $dry -eq 0 ]]; then
    note "calibration: neither link figures nor call costs in $results_dir (run bandwidth and call-costs first)"
    return $SKIP
  fi
  [[ $simgpu -eq 1 ]] && note "simgpu: a calibration from simgpu's own figures, not a GPU's"
  runc calibration "$python" "$root/scripts/gpu_calibration.py" "${args[@]}" \
    --device "${device:-unknown}" --source "scripts/gpu_check.sh --stage core, $(date -u +%F)" \
    --output "$file" || { note "calibration: gpu_calibration.py failed (see the log)"; return 1; }
  [[ $dry -eq 1 ]] && return 0
  md '```json'; md "$(cat "$file")"; md '```'
  step_summary="$(basename "$file"): SIMGPU_CALIBRATION=$(basename "$file"), spillway simulate --calibration"
}

# Recorded real networks replayed on this device (scripts/bench_models.py --gpu): two models at
# 1.5x and 2x, ideal, managed, learned and planned, the device made small by the ballast; every
# run's data verified against the ideal run. No framework: the replayer starts in a second.
step_models() {
  local models=${GPU_CHECK_MODELS:-resnet50-b16,gpt2-b2} factors=${GPU_CHECK_MODEL_FACTORS:-1.5,2}
  local file="$results_dir/models-$kind.json" args=() bw=${h2d_gbps:-45}
  args=(--out "$bundle" --models "$models" --factors "$factors"
        --ways ideal,managed,learned,planned --bandwidth "$bw" --json "$file")
  if [[ $simgpu -eq 1 ]]; then
    note "simgpu: the models on simgpu's virtual clock, one model at one factor, few steps"
    args=(--out "$bundle" --models resnet50-b8 --factors 2 --ways ideal,learned
          --steps 6 --warmup 4 --bandwidth "$bw" --json "$file")
  else
    args+=(--gpu)
  fi
  runc models "$python" "$root/scripts/bench_models.py" "${args[@]}"
  local rc=$?
  [[ $dry -eq 1 ]] && return 0
  md '```'; md "$(cat "$work/models.out")"; md '```'
  step_summary="$(grep -c '^[0-9.]*x ' "$work/models.out") factor rows; figures in $(basename "$file")"
  return $rc
}

# Hook overhead on a job that fits: the same job without and with spillway, with the same
# allocator (per-tensor cudaMallocAsync, and the framework's caching allocator).
step_overhead() {
  local kind=resnet batch=64 rows=() a b
  if [[ $simgpu -eq 1 ]]; then
    kind=oversubscribe batch=0.5
    note "simgpu: plain device memory against managed memory that first migrates; not a hook cost"
  fi
  md "| job | allocator | without spillway (ms/step) | with spillway (ms/step) | overhead |"
  md "| --- | --- | --- | --- | --- |"
  local allocs=(async caching)
  [[ $simgpu -eq 1 ]] && allocs=(driver)
  local alloc fail=0
  for alloc in "${allocs[@]}"; do
    local opts=()
    case $alloc in
      async) job_env=(env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync) ;;
      caching) job_env=(env PYTORCH_CUDA_ALLOC_CONF=backend:native); opts=(--framework-allocator) ;;
    esac
    job "overhead-$alloc-plain" "$kind" "$batch" plain || fail=1
    a=$job_ms
    job "overhead-$alloc-spillway" "$kind" "$batch" "${opts[@]}" || fail=1
    b=$job_ms
    job_env=()
    local pct=""
    [[ -n "$a" && -n "$b" ]] && pct=$(calc "($b - $a) / $a * 100")
    md "| $kind batch $batch | $alloc | $(fmt "$a") | $(fmt "$b") | $(fmt "$pct" 1)% |"
    rows+=("$alloc $(fmt "$pct" 1)%")
  done
  if [[ -x "$bundle/launch_overhead_benchmark" ]]; then
    runc launch-overhead "$bundle/launch_overhead_benchmark" --benchmark_min_time=0.2 ||
      note "launch_overhead_benchmark failed"
    md '```'; md "$(grep -A4 '^interleaved comparison' "$work/launch-overhead.out")"; md '```'
  fi
  step_summary="overhead: ${rows[*]} (goal < 1%)"
  return $fail
}

# Oversubscription: the job's unlimited-memory peak P, then budgets P/1.25, P/1.5, P/2 enforced
# with ballast, for each policy; against the unlimited step time and the bandwidth bound.
step_oversubscription() {
  local kinds=(resnet gpt) batch_of_resnet=128 batch_of_gpt=8 factors
  read -r -a factors <<<"${GPU_CHECK_FACTORS:-1.25 1.5 2}"
  [[ $simgpu -eq 1 ]] && kinds=(oversubscribe train_like)
  [[ -n "${GPU_CHECK_JOBS:-}" ]] && read -r -a kinds <<<"$GPU_CHECK_JOBS"
  local kind fail=0 any=0
  if [[ $simgpu -eq 0 ]]; then
    note "managed: plain managed memory, no hints: the job under spillway run --eviction none (backed by managed memory, nothing moved by spillway; the driver pages on demand)"
  else
    note "managed: train_like --managed without spillway; oversubscribe under spillway run --eviction none"
  fi
  local can_plan=0
  if [[ $dry -eq 1 ]] || "${spillway[@]}" --help 2>/dev/null | grep -q '^  plan'; then
    can_plan=1
    note "planned policy: the job recorded once at the budget (\`--mode record\`), \`spillway plan\` on its trace, then run with \`--policy\`; the summary's policy_file section says whether the run followed it"
  else
    note "planned policy: no \`spillway plan\` in this build (rows skipped)"
  fi
  # Unlimited and spillway runs with the same (per-tensor) PyTorch allocator.
  [[ $simgpu -eq 1 ]] || job_env=(env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync)
  md "| job | × budget | policy | ms/step | vs unlimited | bound (ms) | vs bound | moved/step |"
  md "| --- | --- | --- | --- | --- | --- | --- | --- |"
  for kind in "${kinds[@]}"; do
    if [[ $simgpu -eq 1 && ! -x "$bundle/$kind" ]]; then
      note "$kind is not in the bundle"; continue
    fi
    any=1
    local batch peak unlimited_ms headroom=""
    if [[ $simgpu -eq 1 ]]; then
      # The unlimited run of each size gets a device four times the budget (below).
      unlimited_ms=""
    else
      batch=$([[ $kind == resnet ]] && echo $batch_of_resnet || echo $batch_of_gpt)
      job "$kind-unlimited" "$kind" "$batch" plain || { note "$kind: unlimited run failed"; fail=1; continue; }
      unlimited_ms=$job_ms
      peak=$job_peak
      [[ -n "$peak" || $dry -eq 1 ]] || { note "$kind: no peak memory in its result line"; fail=1; continue; }
      # The ballast's headroom: what the job took outside its allocator in the unlimited run,
      # and 256 MiB for the driver's own (not a twentieth of the device: that is 4 GiB on an H100,
      # enough for the managed baseline not to be oversubscribed at 1.25x or 1.5x).
      headroom=""
      if [[ -n "$job_outside" ]]; then
        headroom=$(calc "int($job_outside + 256 * 2**20)")
        note "$kind: the ballast leaves $(calc "round($headroom / 2**20)") MiB beside the budget ($(calc "round($job_outside / 2**20)") MiB the job took outside its allocator, and 256 MiB)"
      elif [[ $dry -eq 1 ]]; then
        headroom=MEASURED
      else
        note "$kind: no outside_allocator_bytes in its result line: the ballast leaves 5% of the device"
      fi
    fi
    [[ $simgpu -eq 1 ]] || md "| $kind | unlimited | - | $(fmt "$unlimited_ms") | 1.00 | | | |"
    local factor policy
    for factor in "${factors[@]}"; do
      local budget opts=()
      if [[ $simgpu -eq 1 ]]; then
        # The device is the budget; the job is `factor` times it; unlimited: the same job on a
        # device four times larger.
        batch=$factor
        opts=(--device-memory "$SIMGPU_MEMORY")
        run_memory=$((4 * sim_bytes))
        job "$kind-$factor-unlimited" "$kind" "$factor" plain || {
          note "$kind: unlimited run at ${factor}x failed"; fail=1; }
        run_memory=""
        unlimited_ms=$job_ms
        md "| $kind | $factor | unlimited (no spillway) | $(fmt "$unlimited_ms") | 1.00 | | | |"
      else
        budget=$(calc "int(${peak:-0} / $factor)")
        [[ $dry -eq 1 ]] && budget="PEAK/$factor"
        opts=(--ballast --device-memory "$budget")
        [[ -n "$headroom" ]] && opts+=(--ballast-headroom "$headroom")
      fi
      for policy in managed lru learned planned; do
        local popts=()
        case $policy in
          managed)
            if [[ $simgpu -eq 1 && $kind == train_like ]]; then
              # The job allocates managed memory itself, without spillway: plain demand paging.
              job "$kind-$factor-managed" train_like_managed "$factor" plain || {
                note "$kind at ${factor}x, plain managed: exit $job_rc"; fail=1; }
              md "| $kind | $factor | managed (no spillway) | $(fmt "$job_ms") | $([[ -n "$job_ms" && -n "$unlimited_ms" ]] && fmt "$(calc "$unlimited_ms / $job_ms")" || echo n/a) | | | |"
              say "  $kind ${factor}x plain managed: $(fmt "$job_ms") ms/step"
              continue
            fi
            # Backed by managed memory under spillway, moved only by the driver's demand paging.
            popts=(--eviction none) ;;
          planned)
            ((can_plan)) || continue
            # Record the job at this budget, plan for the budget, then follow the plan.
            local trace="$work/$kind-$factor.trace" plan_file="$work/$kind-$factor.policy.toml"
            local plan_budget=${budget:-$SIMGPU_MEMORY}
            rm -f "$trace"
            local saved_env=("${job_env[@]}")
            job_env=(env "SPILLWAY_TRACE=$trace" "${saved_env[@]:1}")
            job "$kind-$factor-record" "$kind" "$batch" "${opts[@]}" --mode record || {
              note "$kind at ${factor}x, recording for the plan: exit $job_rc"; fail=1; }
            job_env=("${saved_env[@]}")
            if ! runc "$kind-$factor-plan" "${spillway[@]}" plan "$trace" --device-memory \
                "$plan_budget" -o "$plan_file"; then
              note "$kind at ${factor}x: spillway plan failed (see $kind-$factor-plan in the log)"
              fail=1
              continue
            fi
            popts=(--policy "$plan_file") ;;
          *) popts=(--eviction "$policy") ;;
        esac
        job "$kind-$factor-$policy" "$kind" "$batch" "${opts[@]}" "${popts[@]}" || {
          note "$kind at ${factor}x with $policy: exit $job_rc"; fail=1; }
        local moved="" bound="" rel="" relb=""
        local pre evi
        pre=$job_pre
        evi=$job_evi
        # (With --eviction none spillway moves nothing: the driver's paging is not in its counts.)
        if [[ $policy != managed && -n "$pre" && -n "$evi" && -n "${h2d_gbps:-}" &&
              -n "$unlimited_ms" ]]; then
          local runs=$((simgpu ? 4 : steps_per_run + 3))
          moved=$(calc "($pre + $evi) / $runs / 2^20")
          bound=$(calc "max($unlimited_ms, ($pre / ${h2d_gbps:-1} + $evi / ${d2h_gbps:-1}) / 1e6 / $runs)")
        fi
        [[ -n "$job_ms" && -n "$unlimited_ms" ]] && rel=$(calc "$unlimited_ms / $job_ms")
        [[ -n "$job_ms" && -n "$bound" ]] && relb=$(calc "$job_ms / $bound")
        local label=$policy moved_cell="$(fmt "$moved" 0) MiB"
        [[ $policy == managed ]] && label="managed (spillway --eviction none)" moved_cell=""
        md "| $kind | $factor | $label | $(fmt "$job_ms") | $(fmt "$rel") | $(fmt "$bound") | $(fmt "$relb") | $moved_cell |"
        say "  $kind ${factor}x $policy: $(fmt "$job_ms") ms/step ($(fmt "$rel") of unlimited throughput)"
      done
    done
  done
  job_env=()
  ((any)) || return $SKIP
  step_summary="see the table in the results file"
  return $fail
}

# Capacity: the largest batch that trains without spillway, then with it on the same GPU.
# The demo with --overwrite at 2x the budget: once every buffer is filled, memsets overwrite each
# from its second MiB on, then the same with copies from the host (--overwrite-with copy). The
# whole 2 MiB chunks a memset or copy covers that the engine had evicted are discarded first
# (cuMemDiscardBatchAsync), so it populates them without copying the old contents in; the demo's
# checksum says whether any data the job kept was lost.
step_memsets() {
  local opts=() bytes buffer=64MiB
  if [[ $simgpu -eq 1 ]]; then
    opts+=(--simgpu --device-memory "$SIMGPU_MEMORY")
    bytes=$(calc "int(2 * $sim_bytes)")
    buffer=4MiB
  else
    local budget_gib=${GPU_CHECK_MEMSET_BUDGET_GIB:-8}
    opts+=(--ballast --device-memory "${budget_gib}GiB")
    bytes=$((2 * budget_gib * 1024 * 1024 * 1024))
  fi
  local with name rc line discarded outcome ok=1 summaries=()
  for with in memset copy; do
    name=memsets-$with
    rm -f "$work/$name.summary.json"
    runc "$name" "${spillway[@]}" run "${opts[@]}" --summary "$work/$name.summary.json" -- \
      "$bundle/oversubscribe" --bytes "$bytes" --buffer "$buffer" --passes 1 \
      --overwrite-with "$with"
    rc=$?
    [[ $dry -eq 1 ]] && continue
    line=$(grep -m1 '^checksum' "$work/$name.out")
    discarded=$("$python" -c 'import json,sys
print(json.load(open(sys.argv[1]))["engine"].get("overwrite_discard_bytes", ""))' \
      "$work/$name.summary.json" 2>/dev/null)
    md "- \`oversubscribe --bytes $bytes --buffer $buffer --passes 1 --overwrite-with $with\` under spillway"
    md "  - ${line:-no checksum line (exit $rc)}"
    md "  - discarded before the overwrites: ${discarded:-n/a} bytes (\`engine.overwrite_discard_bytes\`)"
    outcome="exit $rc"
    [[ -n "$line" ]] && outcome=${line%% matches*}
    summaries+=("$with: $outcome, ${discarded:-?} bytes discarded")
    [[ $rc -eq 0 && "$line" == *"matches the host's"* ]] || ok=0
  done
  [[ $dry -eq 1 ]] && return 0
  step_summary="${summaries[0]}; ${summaries[1]}"
  ((ok))
}

step_capacity() {
  local kind=resnet start=32 limit=8
  [[ $quick -eq 1 ]] && limit=4
  if [[ $simgpu -eq 1 ]]; then
    kind=oversubscribe
  fi
  local saved=$steps_per_run
  steps_per_run=2
  # grow LABEL START [job options]: doubles the size from START while the job trains (up to
  # $cap); sets `grown` to the largest size that trained (empty: none).
  grow() {
    local label=$1 size=$2 best="" n=0
    shift 2
    while ((n < 12)); do
      if job "capacity-$label-$size" "$kind" "$size" "$@"; then
        best=$size
      else
        break
      fi
      [[ $dry -eq 1 ]] && break
      size=$(calc "$size * 2")
      n=$((n + 1))
      [[ -n "${cap:-}" ]] && [[ $(calc "($size > $cap)") == 1 ]] && break
    done
    grown=$best
  }
  local base with cap="" grown=""
  if [[ $simgpu -eq 1 ]]; then
    cap=2
    limit=4
    grow plain 0.25 plain
    base=$grown
    cap=$(calc "${base:-0.25} * $limit")
    grow spillway "${base:-0.25}" --device-memory "$SIMGPU_MEMORY"
    with=$grown
  else
    # The same budget on both sides: PyTorch limited to it (set_per_process_memory_fraction)
    # without spillway; ballast + budget with it. Host memory bounds how far spillway can go.
    local budget_mib=$((${GPU_CHECK_CAPACITY_BUDGET_GIB:-16} * 1024)) total_mib
    total_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null |
                head -n 1 | tr -d ' ')
    [[ -n "$total_mib" ]] || total_mib=81559
    cap=4096
    job_args=(--memory-fraction "$(calc "$budget_mib / $total_mib")")
    grow plain "$start" plain
    job_args=()
    base=$grown
    cap=$(calc "${base:-$start} * $limit")
    grow spillway "${base:-$start}" --ballast --device-memory "${budget_mib}MiB"
    with=$grown
    md "Budget: ${budget_mib} MiB of ${total_mib} MiB (GPU_CHECK_CAPACITY_BUDGET_GIB)."
  fi
  steps_per_run=$saved
  local ratio=""
  [[ -n "$base" && -n "$with" ]] && ratio=$(calc "$with / $base")
  md "| job | largest without spillway | largest with spillway | ratio (searched up to ${limit}x) |"
  md "| --- | --- | --- | --- |"
  md "| $kind | ${base:-none} | ${with:-none} | $(fmt "$ratio" 1)x |"
  step_summary="$kind: ${base:-none} -> ${with:-none} ($(fmt "$ratio" 1)x; goal >= 4x)"
  [[ -n "$base" && -n "$with" ]] || [[ $dry -eq 1 ]]
}

# The attention benchmark (docs/attention-benchmark.md): spillway's kernels alone
# (attention_benchmark, exit 2 = no GPU), then side by side with PyTorch's SDPA backends
# (torch_compare.py, when torch imports; it compiles spillway's extension first). Their own
# timeout: GPU_CHECK_ATTENTION_TIMEOUT. Both outputs go into the results file whole.
step_attention() {
  local bin="$bundle/attention_benchmark" rc=0 ran=0 brc=0 trc=0 parts=() quick_flag=()
  local run_timeout=${GPU_CHECK_ATTENTION_TIMEOUT:-540}  # runc's limit, for both programs
  [[ $quick -eq 1 ]] && quick_flag=(--quick)
  if [[ -x "$bin" || $dry -eq 1 ]]; then
    runc attention_benchmark "$bin" "${quick_flag[@]}" || brc=$?
    md '```'; md "$(head -n 400 "$work/attention_benchmark.out")"; md '```'
    case $brc in
      0) ran=1; parts+=("benchmark ran") ;;
      2) note "attention_benchmark: no CUDA device or kernels not built (exit 2)" ;;
      *) ran=1; rc=1; parts+=("benchmark FAILED (exit $brc)") ;;
    esac
  else
    note "no attention_benchmark in the bundle (it is built only with nvcc)"
  fi
  if [[ $simgpu -eq 1 ]]; then
    note "simgpu: PyTorch's CUDA cannot run on the simulator; torch_compare.py not run"
  elif [[ $dry -eq 1 ]] || "$python" -c 'import torch' >/dev/null 2>&1; then
    runc torch_compare "$python" "$root/attention_kernels/benchmark/torch_compare.py" \
      "${quick_flag[@]}" || trc=$?
    md ""; md '```'; md "$(head -n 400 "$work/torch_compare.out")"; md '```'
    local goals
    goals=$(grep '^Goals' "$work/torch_compare.out" 2>/dev/null | sed -E \
      's/.*forward min ([0-9.]+).*backward min ([0-9.]+).*/fwd\/flash min \1 (goal 1), bwd\/flash min \2 (goal 0.8)/')
    case $trc in
      0) ran=1; parts+=("torch_compare ran") ;;
      2) note "torch_compare.py: no CUDA device visible to PyTorch (exit 2)" ;;
      *) ran=1; rc=1; parts+=("torch_compare FAILED (exit $trc)") ;;
    esac
    grep -q "^Goals.*differ from flash" "$work/torch_compare.out" 2>/dev/null &&
      goals+=" BUT spillway's outputs differ from flash's"
    [[ -n "$goals" ]] && parts+=("$goals")
  else
    note "PyTorch does not import: torch_compare.py not run"
  fi
  ((ran)) || return $SKIP
  [[ $dry -eq 1 ]] && return 0
  step_summary=$(IFS=';'; echo "${parts[*]:-ran}" | sed 's/;/; /g')
  return $rc
}

# ---- main

if [[ $dry -eq 1 ]]; then
  echo "gpu_check.sh --dry-run: the steps and the commands they would run (bundle: $bundle)"
fi
say "spillway GPU check ($kind) — results: $results, log: $log"
md "# spillway GPU check ($kind), $(date -u '+%Y-%m-%d')"
md ""
md "Command: \`scripts/gpu_check.sh$([[ $simgpu -eq 1 ]] && echo ' --simgpu')$([[ $quick -eq 1 ]] && echo ' --quick')$([[ -n $stage ]] && echo " --stage $stage")$([[ -n $only && -z $stage ]] && echo " --only $only")$( ((time_limit > 0)) && echo " --time-limit $time_limit")\`; full log: \`${log##*/}\`."

h2d_gbps="" d2h_gbps="" device="" driver="" step_summary=""
if [[ -f "$results_dir/link-$kind.json" && $dry -eq 0 ]]; then
  # An earlier stage measured the link: its figures until this run's bandwidth step, if any.
  read -r h2d_gbps d2h_gbps < <("$python" -c 'import json,sys
link = json.load(open(sys.argv[1]))
print(link["h2d_gbps"], link["d2h_gbps"])' "$results_dir/link-$kind.json" 2>/dev/null)
  say "link: H2D ${h2d_gbps:-?} GB/s, D2H ${d2h_gbps:-?} GB/s, from $results_dir/link-$kind.json"
  md ""
  md "Link: H2D ${h2d_gbps:-?} GB/s, D2H ${d2h_gbps:-?} GB/s, as an earlier stage measured it (\`link-$kind.json\`)."
elif [[ $simgpu -eq 1 ]]; then  # known without the bandwidth step
  h2d_gbps=${SIMGPU_H2D_GBPS:-45} d2h_gbps=${SIMGPU_D2H_GBPS:-53}
fi
run_step info "device, driver, versions"
run_step bundle "the bundle's libraries resolve"
run_step doctor "feasibility: managed oversubscription, managed pools, discard, batch prefetch"
run_step gpu-tests "the gpu-labelled tests"
run_step bandwidth "host<->device bandwidth"
run_step call-costs "what each driver call the engine makes costs, by size"
run_step rates "demand faults and launches: their cost, and the hook's per launch"
run_step calibration "simgpu's and the simulator's calibration from the figures above"
run_step models "recorded real networks replayed: ideal, managed, learned, planned"
run_step overhead "hook overhead on a job that fits (goal < 1%)"
run_step oversubscription "oversubscription at 1.25x, 1.5x, 2x the budget, per policy"
run_step memsets "memsets and copies over evicted data: discarded first, nothing the job kept lost"
run_step capacity "largest trainable batch without and with spillway"
run_step attention "the attention benchmark"

md ""
md "## Notes"
md ""
for n in "${notes[@]}"; do md "- $n"; done
md ""
md "## Commands run"
md ""
md '```'
for c in "${commands[@]}"; do md "$c"; done
md '```'

say ""
say "== summary ($kind; results: $results)"
say "$(printf '%-17s %-8s %s' step status result)"
for row in "${table[@]}"; do say "$row"; done
exit $step_failed
