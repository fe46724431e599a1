#!/usr/bin/env python3
"""The residency engine's benchmark on simgpu: the training-like workload (examples/train_like)
at several oversubscription factors, run four ways, as a table.

  managed  every allocation cuMemAllocManaged, no spillway: plain demand paging, no hints
  lru      under libspillway.so with SPILLWAY_EVICTION=lru
  learned  under libspillway.so with SPILLWAY_EVICTION=learned (the default: it plans the step
           it detects online and follows the plan, docs/engine.md "Online planning")
  no-plan  the same with SPILLWAY_ONLINE_PLAN=0: the learned policy alone
  ideal    a device big enough for everything (no spillway, nothing moves)

Each configuration runs twice, for --short and --long steps; per-step bytes moved and demand
faults are the difference of simgpu's stats (SIMGPU_STATS) divided by the extra steps, so setup
and the final checksum copy drop out. The step time is the mean of the event-timed steps
(virtual clock) that the long run has beyond the short one. The defaults, steps 20..23, come after
the online plan's trial: the plan is made once two steps are recorded with kernel times, followed
until its step times settle, then the learned policy decides until its do, and the faster goes on
(docs/engine.md, "Online planning"); the policy column reads learned+plan when the plan won,
learned-plan when it lost, and ends in ? when the trial was still running. For the engine rows the
bound is max(ideal step time, H2D bytes / H2D bandwidth, D2H bytes / D2H bandwidth) per step (each
direction on its own copy engine) and `ratio` = step time / bound. Every run's checksum must
equal the ideal run's.

Usage: scripts/bench_train_like.py [--out DIR] [--memory SIZE] [--factors 1.5,2,4]
                                   [--layers N] [--short N] [--long N] [-- extra train_like args]
DIR is the build's output folder (default build/out) holding train_like, libtrain_kernels.so,
libspillway.so and simgpu/libcuda.so.1.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile


def run_job(out, env_extra, args):
    """Runs train_like; returns (stdout, simgpu stats dict, spillway summary dict or None)."""
    with tempfile.TemporaryDirectory() as tmp:
        stats_path = os.path.join(tmp, "stats.json")
        summary_path = os.path.join(tmp, "summary.json")
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = os.path.join(out, "simgpu")
        env["SIMGPU_STATS"] = stats_path
        env["SPILLWAY_SUMMARY"] = summary_path
        env.update(env_extra)
        proc = subprocess.run([os.path.join(out, "train_like")] + args, env=env,
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            sys.exit("bench_train_like: %s failed (exit %d):\n%s%s" %
                     (" ".join(args), proc.returncode, proc.stdout, proc.stderr))
        with open(stats_path) as f:
            stats = json.load(f)
        summary = None
        if os.path.exists(summary_path):
            with open(summary_path) as f:
                summary = json.load(f)
        return proc.stdout, stats, summary


def parse_output(stdout):
    steps, checksum = [], None
    for line in stdout.splitlines():
        if line.startswith("step ") and line.endswith(" ms"):
            steps.append(float(line.split(":")[1].split()[0]) / 1e3)
        elif line.startswith("checksum 0x"):
            checksum = line.split()[1]
    return steps, checksum


def moved(stats):
    return {
        # bytes copied in: made resident by prefetch or fault, less those zero-filled (no data)
        "h2d": (stats["prefetched_bytes"] + stats["demand_faults"]["bytes"] -
                stats.get("zero_filled_bytes", 0)),
        "d2h": stats["evicted_bytes"],
        "faults": stats["demand_faults"]["count"],
    }


def measure(out, env_extra, args, short, long_):
    _, stats_short, _ = run_job(out, env_extra, args + ["--steps", str(short)])
    stdout, stats_long, summary = run_job(out, env_extra, args + ["--steps", str(long_)])
    steps, checksum = parse_output(stdout)
    a, b = moved(stats_short), moved(stats_long)
    extra = long_ - short
    result = {k: (b[k] - a[k]) / extra for k in a}
    result["step"] = sum(steps[short:long_]) / extra
    result["checksum"] = checksum
    result["policy"] = summary["engine"]["policy"] if summary and "engine" in summary else "-"
    plan = summary["engine"].get("policy_file") if result["policy"] != "-" else None
    if plan and plan.get("path") == "online plan" and plan.get("steps_followed", 0) > 0:
        # The online plan was followed: on after its trial, or dropped by it.
        result["policy"] += "-plan" if plan.get("trial") == "rejected" else "+plan"
        if plan.get("trial") not in ("kept", "rejected"):
            result["policy"] += "?"  # still on trial when the run ended: measure later steps
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="build/out")
    parser.add_argument("--memory", default="128MiB", help="simulated device memory")
    parser.add_argument("--factors", default="1.5,2,4")
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--short", type=int, default=20)
    parser.add_argument("--long", type=int, default=24)
    parser.add_argument("extra", nargs="*", help="more train_like arguments (after --)")
    opts = parser.parse_args()
    if opts.long <= opts.short or opts.short < 1:
        sys.exit("bench_train_like: need 1 <= --short < --long")
    out = os.path.abspath(opts.out)
    h2d_bw = float(os.environ.get("SIMGPU_H2D_GBPS", "45")) * 1e9
    d2h_bw = float(os.environ.get("SIMGPU_D2H_GBPS", "53")) * 1e9
    shim = os.path.join(out, "libspillway.so")

    print("train_like on simgpu: %s device, %d layers, steps %d..%d measured; H2D %.0f GB/s, "
          "D2H %.0f GB/s" % (opts.memory, opts.layers, opts.short, opts.long - 1, h2d_bw / 1e9,
                             d2h_bw / 1e9))
    header = ("%-6s %-8s %-12s %10s %10s %10s %8s %10s %7s %9s" %
              ("factor", "run", "policy", "step ms", "H2D MB", "D2H MB", "faults", "bound ms",
               "ratio", "vs manag."))
    print("(per step)")
    print(header)
    print("-" * len(header))
    for factor_text in opts.factors.split(","):
        factor = float(factor_text)
        base = ["--oversubscription", factor_text, "--layers", str(opts.layers),
                "--memory", opts.memory] + opts.extra
        rows = {
            "ideal": measure(out, {"SIMGPU_MEMORY": "64GiB"}, base, opts.short, opts.long),
            "managed": measure(out, {"SIMGPU_MEMORY": opts.memory}, base + ["--managed"],
                               opts.short, opts.long),
        }
        for name, policy, online in (("lru", "lru", "1"), ("learned", "learned", "1"),
                                     ("no-plan", "learned", "0")):
            rows[name] = measure(out, {"SIMGPU_MEMORY": opts.memory, "LD_PRELOAD": shim,
                                       "SPILLWAY_EVICTION": policy,
                                       "SPILLWAY_ONLINE_PLAN": online}, base, opts.short,
                                 opts.long)
        ideal = rows["ideal"]["step"]
        for name in ("managed", "lru", "learned", "no-plan", "ideal"):
            r = rows[name]
            bound = ratio = speedup = ""
            if name in ("lru", "learned", "no-plan"):
                b = max(ideal, r["h2d"] / h2d_bw, r["d2h"] / d2h_bw)
                bound = "%.3f" % (b * 1e3)
                ratio = "%.2f" % (r["step"] / b)
                speedup = "%.2fx" % (rows["managed"]["step"] / r["step"])
            wrong = "" if r["checksum"] == rows["ideal"]["checksum"] else "  CHECKSUM DIFFERS"
            print("%-6s %-8s %-12s %10.3f %10.1f %10.1f %8.1f %10s %7s %9s%s" %
                  ("%.1fx" % factor, name, r["policy"], r["step"] * 1e3, r["h2d"] / 1e6,
                   r["d2h"] / 1e6, r["faults"], bound, ratio, speedup, wrong))
    return 0


if __name__ == "__main__":
    sys.exit(main())
