#!/usr/bin/env bash
# spillway-inspect, spillway-report and spillway-export on a synthetic training trace written
# through the TraceWriter (trace_synthetic_writer): the summary names the peak, the step and the
# swap candidates; the HTML has its plots; the export is gzip'd JSON that parses with Python and
# has counter, slice, async and flow events; bad input gives one line naming the file.
# Usage: trace_tools_test.sh OUT_DIR TEST_BIN_DIR
set -euo pipefail
out=$1
bin=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$bin/trace_synthetic_writer" "$tmp/run.trace" 8

"$out/spillway-inspect" --help | grep -q "usage: spillway-inspect" || fail "--help"
"$out/spillway-inspect" --no-symbolize "$tmp/run.trace" >"$tmp/inspect.txt"
cat "$tmp/inspect.txt"
for needle in "spillway trace 1." "job       synthetic_train" "dropped   0" \
              "peak: 896 MiB at" "step: 9 launches every" "8 steps found" \
              "swap candidates (allocation sites by bytes x idle time; [id] is a policy rule's call_site):" \
              "  1. " "launch 75" "alloc 38" "free " "kernel time" "uvm counter 40"; do
  grep -qF -- "$needle" "$tmp/inspect.txt" || fail "inspect output lacks '$needle'"
done
# Each candidate names its site's id, as a policy rule's call_site writes it.
grep -qE -- "^   1\. .* \[[0-9a-f]{16}\] " "$tmp/inspect.txt" || fail "inspect names no call-site id"

"$out/spillway-report" --no-symbolize "$tmp/run.trace" -o "$tmp/report.html" >/dev/null
"$out/spillway-export" "$tmp/run.trace" --perfetto "$tmp/run.json.gz" >/dev/null
python3 - "$tmp/report.html" "$tmp/run.json.gz" <<'PY'
import gzip, json, sys
html = open(sys.argv[1], encoding="utf-8").read()
problems = []
if html.count("<svg") < 3: problems.append(f"{html.count('<svg')} svg charts, expected 3")
for needle in ['class="peak"', "launches per step", "Per-kernel working sets", "Swap candidates",
               "Unified-memory faults", "synthetic_train"]:
    if needle not in html: problems.append(f"report lacks {needle!r}")
doc = json.load(gzip.open(sys.argv[2], "rt", encoding="utf-8"))
phases = {}
for e in doc["traceEvents"]:
    phases[e["ph"]] = phases.get(e["ph"], 0) + 1
for ph in ["C", "X", "b", "e", "s", "f", "M"]:
    if phases.get(ph, 0) == 0: problems.append(f"export has no {ph!r} events")
if phases.get("s") != 75 or phases.get("f") != 75: problems.append(f"flows: {phases}")
if problems:
    print("FAIL:", *problems, sep="\n  ")
    sys.exit(1)
print("report and export ok:", len(html), "bytes of HTML, events", phases)
PY

# Bad input: exit 1 and one line naming the file, from each tool.
size=$(stat -c %s "$tmp/run.trace")
head -c $((size - 5)) "$tmp/run.trace" >"$tmp/cut.trace"
for tool in "spillway-inspect" "spillway-report -o $tmp/x.html" "spillway-export --perfetto $tmp/x.gz"; do
  set -- $tool
  name=$1; shift
  for input in "$tmp/cut.trace" "$tmp/missing.trace"; do
    if "$out/$name" "$input" "$@" >/dev/null 2>"$tmp/err"; then fail "$name accepted $input"; fi
    [[ $(wc -l <"$tmp/err") -eq 1 ]] && grep -qF "$input" "$tmp/err" ||
      { cat "$tmp/err"; fail "$name: expected one error line naming $input"; }
  done
done
grep -q "truncated trace at byte" <("$out/spillway-inspect" "$tmp/cut.trace" 2>&1) ||
  fail "the truncation error gives no offset"
if "$out/spillway-inspect" --top x "$tmp/run.trace" 2>/dev/null; then fail "--top x accepted"; fi

# An output that is the trace itself (by its path or through a link) is refused, the trace kept.
ln -sf "$tmp/run.trace" "$tmp/run-link.trace"
sum=$(md5sum <"$tmp/run.trace")
for tool in "spillway-report -o" "spillway-export --perfetto"; do
  set -- $tool
  for output in "$tmp/run.trace" "$tmp/run-link.trace"; do
    if "$out/$1" "$tmp/run.trace" "$2" "$output" >/dev/null 2>"$tmp/err"; then
      fail "$1 wrote over its own trace ($output)"
    fi
    grep -qF "is the trace itself" "$tmp/err" || { cat "$tmp/err"; fail "$1: no line saying why"; }
  done
done
[[ $(md5sum <"$tmp/run.trace") == "$sum" ]] || fail "the trace changed"
# A device is written through, never replaced; a link stays a link to what was written.
"$out/spillway-report" "$tmp/run.trace" -o /dev/null >/dev/null 2>&1 || fail "report -o /dev/null"
[[ -c /dev/null ]] || fail "/dev/null is no longer a device"
: >"$tmp/target.html"
ln -sf "$tmp/target.html" "$tmp/link.html"
"$out/spillway-report" "$tmp/run.trace" -o "$tmp/link.html" >/dev/null 2>&1 || fail "report -o link"
[[ -L "$tmp/link.html" && -s "$tmp/target.html" ]] || fail "the link was replaced or not followed"
echo PASS
