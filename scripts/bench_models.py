#!/usr/bin/env python3
"""The residency engine on real networks' recorded training steps, on simgpu: every trace in
workloads/traces/ (or those named) at several oversubscription factors, replayed by
spillway-replay (docs/workloads.md) in each of these ways, as one table per model:

  ideal    a device big enough for everything, no spillway: nothing moves
  managed  every tensor cuMemAllocManaged, no spillway: plain demand paging, no hints
  none     under spillway with --eviction none: managed pools that spillway never moves
  lru      under spillway with --eviction lru
  learned  under spillway with the default policy (learned, with its online plan and trial)
  planned  under spillway with --policy FILE, FILE from `spillway plan JOB --device-memory B`:
           JOB the replay itself recorded by `spillway profile` (5 steps on a big device), as a
           user plans a job, B the engine's budget at that device size (from a run's summary)

The device of a run at factor F has peak / F bytes (SIMGPU_MEMORY; peak = the trace's peak live
bytes), and spillway's budget is all of it (`spillway run --device-memory`): simgpu's memory holds
nothing but the job's allocations, where spillway's default budget leaves 5% of a GPU for what a
job takes outside them (docs/engine.md, "Settings"), as --gpu's ballast headroom does. Each run
replays --steps steps and reports the mean step time (simgpu's virtual clock) over those after
--warmup (--touch 64KiB by default: 8 bytes checked every 64 KiB of each access,
simgpu's virtual times the same as with page, docs/workloads.md). Three bounds per factor:
`simulate`, the `bound` row of `spillway simulate TRACE --device-memory` (Belady over 2 MiB
chunks, each taking its backed bytes, simgpu's cost model, perfect overlap); `fnu`,
workloads/bound.py's farthest-next-use eviction at allocation granularity at --bandwidth GB/s
each way (the real networks issue's bound); and `cap`, the `cap-bound` row of the same
simulate: a lower bound on the step time of any schedule on simgpu's model, from the device's
capacity (docs/simulate.md, "The capacity bound"). Where a goal's multiple of `fnu` is below
`cap`, no policy can meet it. `link`, the `link-bound` row: the same bound where demand faults
share the copy engines with prefetches, as on a GPU (simgpu's faults bypass them, so `link` is a
bound for hardware, not for these runs). `x fnu` = step / max(ideal, fnu).
Every run's digest must equal the ideal run's with the same steps (the replayer verifies every
byte it touched); a run whose digest differs, that fails, or whose summary lists errors is
marked and makes the script exit 1. A line under a factor's row names the ways (`learned`,
`planned`) under which simgpu's driver evicted on its own because the device was full, in the
measured steps (`capacity_evicted_bytes` between the context synchronizes that end the warm-up and
the last step, from simgpu's `context_syncs`): a policy that keeps the device within its budget
leaves it at zero. The JSON also has the whole run's figure, which counts the warm-up and the
replayer's final sweep (it reads every live tensor once, more than the device holds).

On a real GPU (--gpu; the GPU check's `models` stage) the device is the GPU itself, made the size
of each factor by `spillway run --ballast --device-memory` with 64 MiB of headroom (a device that
size cannot be had otherwise), and the times are the GPU's (the replayer's kernels spin for each op's time): `ideal`
runs on the whole GPU without spillway; `managed` is the replay's managed allocations under
`spillway run --ballast --eviction none` (the ballast makes the device small; spillway moves
nothing); `none`, `lru`, `learned` and `planned` as above with the ballast. simgpu's own counts
(the device evicting on its own) are not there.

`--calibration FILE` (docs/calibration.md) prices everything as a measured GPU does: simgpu reads
it (SIMGPU_CALIBRATION), and `spillway simulate` and `spillway plan` take it (--calibration).

Usage: scripts/bench_models.py [--out DIR] [--models a,b] [--factors 1.25,1.5,2,4]
                               [--ways ideal,managed,...] [--steps N] [--warmup K]
                               [--bandwidth GBps] [--json FILE] [--gpu] [--calibration FILE]
DIR is the build's output folder (default build/out; on a GPU machine the bundle).
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(_ROOT, "workloads"))
import bound as fnu_bound  # noqa: E402  workloads/bound.py

WAYS = ["ideal", "managed", "none", "lru", "learned", "planned"]
# What the ballast leaves beside the budget on a GPU (--gpu): the replayer loads one small module
# and allocates nothing outside its tensors, so 64 MiB, not the default twentieth of the device
# (4 GiB on an H100, more than these models' budgets: the managed baseline would not be short of
# memory at all).
GPU_HEADROOM = "64MiB"


def fail(message):
    sys.exit("bench_models: " + message)


def replay(out, trace, memory, way, args, policy=None, tmp=None):
    """Runs one replay; returns (result dict or None, summary dict or None, error or None)."""
    env = dict(os.environ)
    if not args.gpu:
        env["LD_LIBRARY_PATH"] = os.path.join(out, "simgpu")
        env["SIMGPU_MEMORY"] = str(memory)
        if args.calibration:
            env["SIMGPU_CALIBRATION"] = args.calibration
    cmd = [os.path.join(out, "spillway-replay"), trace, "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--touch", args.touch, "--json"]
    summary_path = os.path.join(tmp, "summary.json")
    stats_path = os.path.join(tmp, "simgpu-stats.json")
    for path in (summary_path, stats_path):
        if os.path.exists(path):
            os.unlink(path)
    env["SIMGPU_STATS"] = stats_path
    if way == "managed":
        cmd += ["--alloc", "managed"]
    if args.gpu and way != "ideal":
        # A GPU is as small as the factor makes it only through spillway's ballast.
        launcher = [os.path.join(out, "spillway"), "run", "--quiet", "--ballast",
                    "--ballast-headroom", GPU_HEADROOM, "--device-memory", str(memory),
                    "--summary", summary_path]
        if way in ("managed", "none", "lru", "learned"):
            launcher += ["--eviction", "none" if way == "managed" else way]
        if way == "planned":
            launcher += ["--policy", policy]
        cmd = launcher + ["--"] + cmd
    elif way not in ("ideal", "managed"):
        launcher = [os.path.join(out, "spillway"), "run", "--simgpu", "--quiet",
                    "--device-memory", str(memory), "--summary", summary_path]
        if way in ("none", "lru", "learned"):
            launcher += ["--eviction", way]
        if way == "planned":
            launcher += ["--policy", policy]
        cmd = launcher + ["--"] + cmd
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    summary = None
    if os.path.exists(summary_path):
        with open(summary_path) as f:
            summary = json.load(f)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return None, summary, "exit %d: %s" % (proc.returncode, tail)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if not lines:
        return None, summary, "no JSON line from spillway-replay"
    result = json.loads(lines[-1])
    # What simgpu's driver evicted on its own because the device was full: zero when the policy
    # keeps the device within its budget. Over the measured steps (the replayer synchronizes the
    # context once at each step's end), and over the whole run.
    if os.path.exists(stats_path):
        with open(stats_path) as f:
            stats = json.load(f)
        result["run_capacity_evicted_bytes"] = stats.get("capacity_evicted_bytes")
        syncs = stats.get("context_syncs") or []
        if len(syncs) >= args.steps:
            before = syncs[args.warmup - 1]["capacity_evicted_bytes"] if args.warmup else 0
            result["capacity_evicted_bytes"] = (
                syncs[args.steps - 1]["capacity_evicted_bytes"] - before)
    return result, summary, None


def calibrated(args):
    """The --calibration flag for spillway-simulate and spillway-plan, if any."""
    return ["--calibration", args.calibration] if args.calibration else []


def simulate_bounds(out, trace, memory, args):
    """The step times of spillway-simulate's `bound`, `cap-bound` and `link-bound` rows, in ms
    (each None if it could not run)."""
    proc = subprocess.run([os.path.join(out, "spillway-simulate"), trace, "--device-memory",
                           str(memory)] + calibrated(args), capture_output=True, text=True,
                          check=False)
    found = {}
    for line in proc.stdout.splitlines():
        fields = line.split()
        if len(fields) > 5 and fields[0] == "bound":
            found["bound"] = float(fields[5])
        if len(fields) > 4 and fields[0] == "cap-bound":
            found["cap"] = float(fields[4])
        if len(fields) > 4 and fields[0] == "link-bound":
            found["link"] = float(fields[4])
    return found.get("bound"), found.get("cap"), found.get("link")


def profile(out, trace, peak, args, path):
    """Records the replay itself (`spillway profile`, a device big enough): the job as spillway
    sees it, which is what a policy file is planned from and matched against (the replayer's own
    digest buffer is one of the job's allocations). Returns an error line or None."""
    env = dict(os.environ)
    if not args.gpu:
        env["LD_LIBRARY_PATH"] = os.path.join(out, "simgpu")
        env["SIMGPU_MEMORY"] = str(2 * peak + (1 << 30))
        if args.calibration:
            env["SIMGPU_CALIBRATION"] = args.calibration
    cmd = [os.path.join(out, "spillway"), "profile"] + ([] if args.gpu else ["--simgpu"]) + [
           "--quiet", "-o", path, "--",
           os.path.join(out, "spillway-replay"), trace, "--steps", "5", "--warmup", "1",
           "--touch", args.touch, "--json"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not os.path.exists(path):
        return "spillway profile failed: " + ((proc.stderr.strip().splitlines() or ["?"])[-1])
    return None


def plan(out, trace, memory, path, args):
    proc = subprocess.run([os.path.join(out, "spillway-plan"), trace, "--device-memory",
                           str(memory), "-o", path] + calibrated(args), capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or ["spillway-plan failed"])[-1]
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(_ROOT, "build", "out"))
    parser.add_argument("--models", default="", help="trace names (without .trace.gz)")
    parser.add_argument("--factors", default="1.25,1.5,2,4")
    parser.add_argument("--ways", default=",".join(WAYS))
    # 30 steps, the last 4 measured: the learned policy's online plan is made in the first few
    # steps and tried against the learned policy alone for a few more; by step 26 its trial has
    # ended for every recorded model (by step 16 it had not for all: VGG-16, the transformers at
    # 1.25x), so `learned` is what the job gets from then on, not a mix of the two.
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=26)
    parser.add_argument("--bandwidth", type=float, default=45.0)
    parser.add_argument("--touch", default="64KiB",
                        help="spillway-replay's --touch (default 64KiB: the same virtual times as "
                        "page in a ninth of the host time on simgpu)")
    parser.add_argument("--json", help="also write every run's numbers to this file")
    parser.add_argument("--calibration",
                        help="a calibration file (docs/calibration.md) for simgpu and the tools")
    parser.add_argument("--gpu", action="store_true",
                        help="on the GPU at hand, made small by spillway's ballast (above)")
    args = parser.parse_args()
    try:
        factors = [float(f) for f in args.factors.split(",")]
    except ValueError:
        parser.error("--factors: not a list of numbers: %r" % args.factors)
    if not factors or any(not 1 <= f <= 64 for f in factors):
        parser.error("--factors must each be between 1 and 64")
    ways = args.ways.split(",")
    for w in ways:
        if w not in WAYS:
            parser.error("--ways: unknown way %r (known: %s)" % (w, ", ".join(WAYS)))
    if "ideal" not in ways:
        ways.insert(0, "ideal")  # the digest every other run is checked against
    if args.calibration:
        if not os.path.isfile(args.calibration):
            parser.error("--calibration %s: no such file" % args.calibration)
        args.calibration = os.path.abspath(args.calibration)
    if not 1 <= args.warmup < args.steps <= 1000:
        parser.error("need 1 <= --warmup < --steps <= 1000")
    for tool in ("spillway-replay", "spillway", "spillway-plan", "spillway-simulate"):
        if not os.access(os.path.join(args.out, tool), os.X_OK):
            fail("%s not found in %s: build first (scripts/build.sh)" % (tool, args.out))
    traces = sorted(glob.glob(os.path.join(_ROOT, "workloads", "traces", "*.trace.gz")))
    if args.models:
        wanted = args.models.split(",")
        by_name = {os.path.basename(t)[:-len(".trace.gz")]: t for t in traces}
        missing = [m for m in wanted if m not in by_name]
        if missing:
            fail("no trace named %s in workloads/traces (known: %s)" %
                 (", ".join(missing), ", ".join(sorted(by_name))))
        traces = [by_name[m] for m in wanted]
    if not traces:
        fail("no traces in workloads/traces (/usr/bin/python3 workloads/recorder/record_all.py makes them)")

    rows, bad = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for trace in traces:
            name = os.path.basename(trace)[:-len(".trace.gz")]
            peak = fnu_bound.peak_live_bytes(trace)
            ideal, _, err = replay(args.out, trace, 2 * peak + (1 << 30), "ideal", args, tmp=tmp)
            if err:
                fail("%s: the ideal run failed: %s" % (name, err))
            print("\n%s: peak %.0f MiB, ideal step %.3f ms" %
                  (name, peak / 2**20, ideal["mean_step_ms"]))
            header = "%-7s %9s %9s %9s %9s" % ("factor", "simulate", "fnu", "cap", "link")
            header += "".join(" %9s" % w for w in ways if w != "ideal")
            header += "  x fnu (learned, planned)  online plan"
            print(header)
            for factor in factors:
                memory = int(peak / factor)
                sim, cap, link = simulate_bounds(args.out, trace, memory, args)
                fnu = fnu_bound.bound(trace, memory, args.bandwidth * 1e9)["bound_s"] * 1e3
                ref = max(ideal["mean_step_ms"], fnu)
                budget = None  # the engine's, from the first run under spillway
                full = []  # ways under which the device evicted on its own
                cells, row = [], {"model": name, "factor": factor, "device_bytes": memory,
                                  "ideal_ms": ideal["mean_step_ms"], "simulate_bound_ms": sim,
                                  "fnu_bound_ms": fnu, "capacity_bound_ms": cap,
                                  "link_bound_ms": link}
                for way in ways:
                    if way == "ideal":
                        continue
                    policy = None
                    if way == "planned":
                        # Planned for the engine's budget (what it keeps of the device), as a
                        # user plans for the budget `spillway run` reports.
                        if budget is None:
                            _, summary, err = replay(args.out, trace, memory, "none",
                                                     argparse.Namespace(**dict(
                                                         vars(args), steps=2, warmup=1)),
                                                     tmp=tmp)
                            budget = ((summary or {}).get("engine") or {}).get("budget_bytes")
                        policy = os.path.join(tmp, "plan.toml")
                        job_trace = os.path.join(tmp, name + ".job.trace")
                        err = None
                        if not os.path.exists(job_trace):
                            err = profile(args.out, trace, peak, args, job_trace)
                        err = err or plan(args.out, job_trace, budget or memory, policy, args)
                        if err:
                            cells.append("   no plan")
                            row[way] = {"error": err}
                            continue
                    result, summary, err = replay(args.out, trace, memory, way, args, policy, tmp)
                    errors = (summary or {}).get("errors") or []
                    if err or errors or result["digest"] != ideal["digest"]:
                        bad += 1
                        why = err or ("summary errors: %s" % errors[:1] if errors else
                                      "digest %s != ideal %s" % (result["digest"], ideal["digest"]))
                        cells.append("    FAILED")
                        row[way] = {"error": why}
                        print("  %s %s at %.2fx: %s" % (name, way, factor, why), file=sys.stderr)
                        continue
                    if summary and budget is None:
                        budget = (summary.get("engine") or {}).get("budget_bytes")
                    ms = result["mean_step_ms"]
                    cells.append(" %9.2f" % ms)
                    row[way] = {"step_ms": ms,
                                "capacity_evicted_bytes": result.get("capacity_evicted_bytes"),
                                "run_capacity_evicted_bytes":
                                    result.get("run_capacity_evicted_bytes")}
                    if way in ("learned", "planned") and result.get("capacity_evicted_bytes"):
                        full.append("%s %.0f MiB" % (way, result["capacity_evicted_bytes"] / 2**20))
                    if summary and "engine" in summary:
                        eng = summary["engine"]
                        row[way].update({k: eng.get(k) for k in
                                         ("prefetch_bytes", "evict_bytes", "step_length")})
                        pf = eng.get("policy_file") or {}
                        row[way]["plan"] = {k: pf.get(k) for k in
                                            ("path", "steps_followed", "trial", "fallback_reason")}
                ratios = ["%.2f" % (row[w]["step_ms"] / ref) if "step_ms" in row.get(w, {})
                          else "-" for w in ("learned", "planned")]
                # What became of learned's online plan: kept or rejected after its trial, still on
                # trial at the end, or none made (the summary's reason).
                online = (row.get("learned") or {}).get("plan") or {}
                verdict = online.get("trial") or ("none" if online.get("fallback_reason") else "-")
                print("%-7s %9s %9.2f %9s %9s%s  %-11s %s" % (
                    "%.2fx" % factor, "%.2f" % sim if sim is not None else "-", fnu,
                    "%.2f" % cap if cap is not None else "-",
                    "%.2f" % link if link is not None else "-", "".join(cells),
                    ", ".join(ratios), verdict))
                if full:
                    print("        the device evicted on its own (simgpu's capacity_evicted_bytes, "
                          "measured steps): %s" % ", ".join(full))
                if args.json:  # as it goes: a run cut short keeps every row measured
                    with open(args.json, "w") as f:
                        json.dump(rows + [row], f, indent=1)
                sys.stdout.flush()
                rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if bad:
        fail("%d runs failed or differed from the ideal run (above)" % bad)


if __name__ == "__main__":
    main()
