#!/usr/bin/env bash
# Tests of the framework example scripts (examples/pytorch, jax, tensorflow) on a machine that may
# lack the frameworks: each compiles, `--help` works without the framework, a bad flag is a usage
# error (exit 2), and a run without the framework says so and exits 3.
# usage: examples_test.sh SOURCE_DIR
set -uo pipefail
src=$(cd "$1" && pwd)
python=$(command -v python3 || command -v python)
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

"$python" - "$tmp" "$src"/examples/{pytorch,jax,tensorflow}/*.py "$src/scripts/gpu_bandwidth.py" <<'PY' ||
import os, py_compile, sys
for i, path in enumerate(sys.argv[2:]):
    py_compile.compile(path, cfile=os.path.join(sys.argv[1], f"{i}.pyc"), doraise=True)
PY
  fail "an example does not compile"

# script:module-that-must-be-missing-for-the-run-check
for entry in pytorch/train_resnet.py:torch pytorch/train_gpt.py:torch jax/train_flax.py:jax \
             tensorflow/train_keras.py:tensorflow; do
  script="$src/examples/${entry%%:*}"
  module=${entry##*:}
  name=${entry%%:*}
  out=$("$python" "$script" --help 2>&1) || fail "$name --help: exit $?"
  grep -q "^usage: ${name##*/}" <<<"$out" || fail "$name --help: no usage line: $out"
  for flag in --batch-size --steps --seed; do
    grep -q -- "$flag" <<<"$out" || fail "$name --help: no $flag"
  done
  grep -qE -- '--depth|--layers' <<<"$out" || fail "$name --help: no depth flag"
  rc=0
  "$python" "$script" --batch-size 0 >"$tmp/out" 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || fail "$name --batch-size 0: exit $rc, want 2"
  grep -q "error: .*--batch-size" "$tmp/out" || fail "$name --batch-size 0: $(cat "$tmp/out")"
  if ! "$python" -c "import $module" 2>/dev/null; then
    rc=0
    "$python" "$script" --steps 1 >"$tmp/out" 2>&1 || rc=$?
    [[ $rc -eq 3 ]] || fail "$name without $module: exit $rc, want 3: $(cat "$tmp/out")"
    grep -q "is not installed" "$tmp/out" || fail "$name without $module: $(cat "$tmp/out")"
  fi
done
"$python" "$src/scripts/gpu_bandwidth.py" --help | grep -q '^usage: gpu_bandwidth.py' ||
  fail "gpu_bandwidth.py --help"

# The attention extension's build needs ninja, the Python headers and nvcc: what is missing is
# said in one line before anything is built (exit 3). With Debian's PyTorch (scripts/setup.sh), a
# PATH without ninja shows it; without PyTorch, that is said instead.
attention="$src/examples/attention/torch_attention.py"
for torch_python in /usr/bin/python3 "$python"; do
  "$torch_python" -c 'import torch' 2>/dev/null || continue
  rc=0
  env PATH=/nonexistent "$torch_python" "$attention" >"$tmp/out" 2>&1 || rc=$?
  [[ $rc -eq 3 ]] || fail "torch_attention.py without ninja: exit $rc, want 3: $(cat "$tmp/out")"
  grep -q '^torch_attention.py: the attention extension cannot be built here: it needs ninja' \
    "$tmp/out" || fail "torch_attention.py without ninja: $(cat "$tmp/out")"
  break
done

finish "example"
