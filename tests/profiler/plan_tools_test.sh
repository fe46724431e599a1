#!/usr/bin/env bash
# spillway-plan, spillway-simulate and spillway-inspect on bad input, on a synthetic training trace
# written through the TraceWriter (trace_synthetic_writer): a bad option value, a trace cut short,
# a policy file that is no regular file or nests arrays deeply each give one line naming what is
# wrong and a nonzero exit, at once; records the recorder dropped are one warning line, and so is
# an op larger than the device; a budget far beyond the workload is planned and simulated at once.
# Usage: plan_tools_test.sh OUT_DIR TEST_BIN_DIR
set -euo pipefail
out=$1
bin=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$bin/trace_synthetic_writer" "$tmp/run.trace" 8
trace=$tmp/run.trace

# expect_error NEEDLE CMD...: CMD exits nonzero (not killed, within 20 s) with exactly one line
# on stderr, which holds NEEDLE.
expect_error() {
  local needle=$1 rc=0
  shift
  timeout 20 "$@" >/dev/null 2>"$tmp/err" || rc=$?
  [[ $rc -ne 0 && $rc -ne 124 && $rc -lt 128 ]] || { cat "$tmp/err"; fail "$*: exit $rc"; }
  [[ $(wc -l <"$tmp/err") -eq 1 ]] && grep -qF -- "$needle" "$tmp/err" ||
    { cat "$tmp/err"; fail "$*: expected one line holding '$needle'"; }
}

# tool_on TOOL TRACE: sets `cmd` to spillway-TOOL on TRACE (plan writes to a scratch file).
tool_on() {
  if [[ $1 == plan ]]; then
    cmd=("$out/spillway-plan" "$2" -o "$tmp/out.toml")
  else
    cmd=("$out/spillway-simulate" "$2")
  fi
}

mkdir -p "$tmp/dir"
{
  echo "version = 1"
  printf 'x = %s%s\n' "$(head -c 100000 /dev/zero | tr '\0' '[')" \
    "$(head -c 100000 /dev/zero | tr '\0' ']')"
} >"$tmp/deep.toml"
for tool in plan simulate; do
  tool_on $tool "$trace"
  # Bad option values: the flag named, and a hint instead of the usage.
  for bad in "--fault-batch-us inf" "--fault-batch-us nan" "--h2d-gbps 1e300" \
             "--d2h-gbps 0" "--oversubscription inf" "--oversubscription 1e308" \
             "--oversubscription 1e-308" "--oversubscription -1" "--copy-engines 3"; do
    set -- $bad
    expect_error "$1 '$2'" "${cmd[@]}" --oversubscription 1.5 "$@"
    grep -qF -- "(see spillway-$tool --help)" "$tmp/err" || fail "$tool $bad: no hint"
  done
  expect_error "unknown flag --bogus (see spillway-$tool --help)" "${cmd[@]}" --bogus
  expect_error "--device-memory needs a value" "${cmd[@]}" --device-memory
  # More oversubscribed than the step has chunks.
  expect_error "--oversubscription 100000 leaves less than one 2 MiB chunk" \
    "${cmd[@]}" --oversubscription 100000
  # Policy files that are no regular file, or nest arrays far deeper than a stack holds.
  for policy in /dev/zero "$tmp/dir"; do
    expect_error "$policy: not a regular file" \
      "${cmd[@]}" --oversubscription 1.5 --policy "$policy"
  done
  expect_error "$tmp/deep.toml:2: Error while parsing value: exceeded maximum nested value depth of 256" \
    "${cmd[@]}" --oversubscription 1.5 --policy "$tmp/deep.toml"
done

# A budget far beyond the workload: planned and simulated at once, as one that fits.
for tool in plan simulate; do
  tool_on $tool "$trace"
  timeout 20 "${cmd[@]}" --device-memory 1PiB >/dev/null || fail "$tool at 1 PiB"
  timeout 20 "${cmd[@]}" --oversubscription 0.000001 >/dev/null ||
    fail "$tool at a millionth oversubscribed"
done

# An op larger than the device (the optimizer touches the 512 MiB allocation): planned and
# simulated, with one warning line naming the launch; none where it fits (the runs above).
for tool in plan simulate; do
  tool_on $tool "$trace"
  timeout 20 "${cmd[@]}" --device-memory 256MiB >/dev/null 2>"$tmp/err" ||
    { cat "$tmp/err"; fail "$tool with an op larger than the device"; }
  [[ $(wc -l <"$tmp/err") -eq 1 ]] &&
    grep -qF "warning: launch 8 of the step (optimizer) touches 512.00 MiB, more than the device's 256.00 MiB" "$tmp/err" ||
    { cat "$tmp/err"; fail "$tool: expected one warning line on the op larger than the device"; }
  timeout 20 "${cmd[@]}" --device-memory 600MiB >/dev/null 2>"$tmp/err" || fail "$tool at 600 MiB"
  [[ ! -s $tmp/err ]] || { cat "$tmp/err"; fail "$tool at 600 MiB: expected no warning"; }
done

# A trace without its end record (the last 32 bytes, docs/trace-format.md): one line, as in
# every tool.
size=$(stat -c %s "$trace")
head -c $((size - 32)) "$trace" >"$tmp/cut.trace"
for tool in plan simulate; do
  tool_on $tool "$tmp/cut.trace"
  expect_error "$tmp/cut.trace: truncated trace at byte $((size - 32)): the trace has no end record" \
    "${cmd[@]}" --oversubscription 1.5
done

# Records the recorder dropped (the end record's last field): planned, with one warning line.
cp "$trace" "$tmp/dropped.trace"
printf '\x03\x00\x00\x00\x00\x00\x00\x00' |
  dd of="$tmp/dropped.trace" bs=1 seek=$((size - 8)) conv=notrunc status=none
for tool in plan simulate; do
  tool_on $tool "$tmp/dropped.trace"
  timeout 20 "${cmd[@]}" --oversubscription 1.5 >/dev/null 2>"$tmp/err" ||
    { cat "$tmp/err"; fail "$tool on a trace with dropped records"; }
  [[ $(wc -l <"$tmp/err") -eq 1 ]] &&
    grep -qF "warning: $tmp/dropped.trace: the recorder dropped 3 records" "$tmp/err" ||
    { cat "$tmp/err"; fail "$tool: expected one warning line on dropped records"; }
done

# spillway-inspect: a bad command line is one line with the hint.
expect_error "unexpected argument '--bogus' (see spillway-inspect --help)" \
  "$out/spillway-inspect" --bogus "$trace"
expect_error "--top wants a number from 1 to 1000, not 'x'" "$out/spillway-inspect" --top x "$trace"
expect_error "--top needs a number" "$out/spillway-inspect" "$trace" --top
expect_error "no TRACE given (see spillway-inspect --help)" "$out/spillway-inspect"
# A bad trace exits 1 from plan and simulate, as from inspect, report and export; a usage error 2.
for tool in "spillway-plan -o $tmp/p.toml" spillway-simulate; do
  set -- $tool
  name=$1; shift
  rc=0; "$out/$name" "$tmp/cut.trace" --oversubscription 2 "$@" >/dev/null 2>&1 || rc=$?
  [[ $rc -eq 1 ]] || fail "$name on a cut trace: exit $rc, not 1"
  rc=0; "$out/$name" "$trace" --oversubscription 2 "$@" --bogus >/dev/null 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || fail "$name with a bad flag: exit $rc, not 2"
done
expect_error "--device-memory needs a size (e.g. 8GiB), not ''" \
  "$out/spillway-plan" "$trace" --device-memory '' -o "$tmp/p.toml"
# spillway-plan -o onto its own trace: refused, the trace kept.
sum=$(md5sum <"$trace")
expect_error "is the trace itself" "$out/spillway-plan" "$trace" --oversubscription 2 -o "$trace"
[[ $(md5sum <"$trace") == "$sum" ]] || fail "spillway-plan changed its trace"
echo PASS
