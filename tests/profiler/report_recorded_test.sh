#!/usr/bin/env bash
# Records examples/oversubscribe on simgpu under the shim (SPILLWAY_MODE=record), then checks that
# spillway-report writes an HTML report with its plots and that spillway-export writes gzip'd
# trace-event JSON that parses and has counter, slice, async and flow events; and that a truncated
# trace gives one clear error line. Usage: report_recorded_test.sh OUT_DIR
set -euo pipefail
out=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

env LD_LIBRARY_PATH="$out/simgpu" SIMGPU_MEMORY=256MiB LD_PRELOAD="$out/libspillway.so" \
    SPILLWAY_MODE=record SPILLWAY_TRACE="$tmp/run.trace" \
    "$out/oversubscribe" --factor 0.75 --buffer 16MiB --passes 3 >"$tmp/run.log" 2>&1 ||
  { echo "FAIL: the recorded run failed:"; cat "$tmp/run.log"; exit 1; }
[[ -s "$tmp/run.trace" ]] || { echo "FAIL: no trace written"; exit 1; }

"$out/spillway-report" "$tmp/run.trace" -o "$tmp/report.html"
"$out/spillway-export" "$tmp/run.trace" --perfetto "$tmp/run.json.gz"

python3 - "$tmp/report.html" "$tmp/run.json.gz" <<'PY'
import gzip, json, sys
html = open(sys.argv[1], encoding="utf-8").read()
problems = []
if len(html) < 5000: problems.append(f"report is only {len(html)} bytes")
if html.count("<svg") < 3: problems.append(f"{html.count('<svg')} svg charts, expected 3")
for needle in ['class="peak"', "launches per step", "Per-kernel working sets", "Swap candidates",
               "time (", "live ("]:
    if needle not in html: problems.append(f"report lacks {needle!r}")
if "<script" in html or "http" in html: problems.append("report is not self-contained")
doc = json.load(gzip.open(sys.argv[2], "rt", encoding="utf-8"))
phases = {}
for e in doc["traceEvents"]:
    phases[e["ph"]] = phases.get(e["ph"], 0) + 1
for ph, what in [("C", "counter"), ("X", "slice"), ("b", "async begin"), ("e", "async end"),
                 ("s", "flow start"), ("f", "flow end"), ("M", "track name")]:
    if phases.get(ph, 0) == 0: problems.append(f"export has no {what} events")
if phases.get("s") != phases.get("f"): problems.append(f"unpaired flows: {phases}")
if problems:
    print("FAIL:", *problems, sep="\n  ")
    sys.exit(1)
print("report and export ok:", len(html), "bytes of HTML, events", phases)
PY

# A truncated trace: exit status 1 and one line that names the file.
size=$(stat -c %s "$tmp/run.trace")
head -c $((size / 2)) "$tmp/run.trace" >"$tmp/cut.trace"
if "$out/spillway-report" "$tmp/cut.trace" -o "$tmp/cut.html" 2>"$tmp/err"; then
  echo "FAIL: a truncated trace was accepted"; exit 1
fi
[[ $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "cut.trace" "$tmp/err" ||
  { echo "FAIL: expected one error line naming the file, got:"; cat "$tmp/err"; exit 1; }
if "$out/spillway-export" /nonexistent.trace --perfetto "$tmp/x.json.gz" 2>"$tmp/err"; then
  echo "FAIL: a missing trace was accepted"; exit 1
fi
grep -q "nonexistent.trace" "$tmp/err" || { echo "FAIL: error does not name the file"; exit 1; }
echo "PASS"
