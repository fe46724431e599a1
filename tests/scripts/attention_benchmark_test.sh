#!/usr/bin/env bash
# Tests of the attention benchmark's command lines without a GPU (docs/attention-benchmark.md):
# torch_compare.py's --help, bad flags, exit 3 without PyTorch (exit 2 with PyTorch but no visible
# GPU), its grid and goal summary; attention_benchmark's --help, one-line flag errors and exit 2
# with no visible GPU (when the build has it: it needs nvcc).
# usage: attention_benchmark_test.sh SOURCE_DIR OUT_DIR
set -uo pipefail
src=$(cd "$1" && pwd)
out=$(cd "$2" && pwd)
compare="$src/attention_kernels/benchmark/torch_compare.py"
python=$(command -v python3 || command -v python)
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

expect 0 '^usage: torch_compare.py' -- "$python" "$compare" --help
expect 2 "unknown backend 'foo'" -- "$python" "$compare" --backends flash,foo
expect 2 'must be >= 512' -- "$python" "$compare" --tokens 10
if "$python" -c 'import torch' >/dev/null 2>&1; then
  CUDA_VISIBLE_DEVICES= expect 2 '^torch_compare.py: no CUDA device visible to PyTorch' -- \
    "$python" "$compare" --quick
else
  expect 3 '^torch_compare.py: PyTorch is not installed' -- "$python" "$compare" --quick
fi
[[ $(wc -l <"$tmp/out") -eq 1 ]] || fail "torch_compare.py: more than one line: $(cat "$tmp/out")"

# The grid mirrors attention_benchmark's; the goal line reads spillway against flash.
expect 0 '^ok$' -- "$python" - "$src/attention_kernels/benchmark" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import torch_compare as tc
full, quick = tc.grid(False, 16384), tc.grid(True, 16384)
assert len(full) == 48 and len(quick) == 8, (len(full), len(quick))
assert all(c["batch"] * c["seq"] == 16384 and c["heads"] * c["dim"] == 2048 for c in full)
assert tc.forward_flops(dict(batch=1, heads=16, seq=4096, dim=128, causal=True)) == \
    2.0 * 16 * 4096 * 4096 * 128
cfgs = [c for c in full if c["dtype"] == "bf16" and c["dim"] == 128 and not c["causal"]]
def row(c, s, f):
    return {"spillway": dict(fwd_ms=s, bwd_ms=s), "flash": dict(fwd_ms=f, bwd_ms=f)}
# spillway twice as slow at seq 512 (not counted: < 4k), as fast at 4k, 8k and 16k.
results = [row(c, 2.0 if c["seq"] < 4096 else 1.0, 1.0) for c in cfgs]
line = tc.goal_summary(cfgs, results)
assert "3 configurations" in line and "forward min 1.00" in line and "NOT" not in line, line
results[-1]["spillway"] = dict(fwd_ms=1.0, bwd_ms=1.5)  # backward at 67% of flash at 16k
line = tc.goal_summary(cfgs, results)
assert "backward min 0.67" in line and "(NOT met: goal >= 0.8)" in line, line
results[-1]["agreement"] = "3.0e-01"  # fast but wrong: the goal line must say so
assert "differ from flash's by >= 1e-2 at 1 of them" in tc.goal_summary(cfgs, results)
results = [{"spillway": dict(note="OOM"), "flash": dict(fwd_ms=1.0, bwd_ms=1.0)} for _ in cfgs]
assert "not measured" in tc.goal_summary(cfgs, results)
print("ok")
PY

bench="$out/attention_benchmark"
if [[ -x "$bench" ]]; then
  expect 0 '^usage: attention_benchmark' -- "$bench" --help
  expect 64 "^attention_benchmark: unknown flag '--frob' \(see --help\)$" -- "$bench" --frob
  expect 64 "^attention_benchmark: --iters: 'x' is not an integer$" -- "$bench" --iters x
  CUDA_VISIBLE_DEVICES= expect 2 '^attention_benchmark: no CUDA device' -- "$bench" --quick
  [[ $(wc -l <"$tmp/out") -eq 1 ]] || fail "attention_benchmark: more than one line: $(cat "$tmp/out")"
else
  echo "note: $bench not built (needs nvcc); its command-line checks skipped"
fi

finish "attention benchmark"
