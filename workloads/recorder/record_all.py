#!/usr/bin/env python3
"""Regenerates the committed traces of real networks (workloads/traces/) and their index.

    /usr/bin/python3 workloads/recorder/record_all.py            # every trace, then the index
    /usr/bin/python3 workloads/recorder/record_all.py --only gpt2-b4 --only nmt-b32

Records each model and batch of TRACES for 4 steps with record.py, one process each, into
workloads/traces/MODEL-bBATCH.trace.gz, then writes workloads/traces/index.json (record.py's
result for every trace) and workloads/traces/README.md (the table). With --only, the other
traces keep their entries from the index already there. Run with a python3 that has PyTorch
(Debian's /usr/bin/python3); the whole set takes about 20 minutes on two cores.
"""

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time

# (model, batch): two batch sizes per model, peaks from about 0.9 to 2.9 GiB (a larger batch of
# vit_b_16 or bert goes past 3 GiB; the transformers' and nmt's peaks are mostly AdamW's state).
TRACES = [
    ("resnet50", 8), ("resnet50", 16),
    ("resnet152", 4), ("resnet152", 8),
    ("vgg16", 4), ("vgg16", 16),
    ("efficientnet_b0", 8), ("efficientnet_b0", 16),
    ("vit_b_16", 4), ("vit_b_16", 8),
    ("gpt2", 2), ("gpt2", 4),
    ("bert", 4), ("bert", 8),
    ("nmt", 32), ("nmt", 64),
]
STEPS = 4

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TRACE_DIR = os.path.join(REPO, "workloads", "traces")


def trace_name(model, batch):
    return f"{model}-b{batch}"


def record_one(model, batch):
    """Runs record.py for one trace; returns its result object."""
    output = os.path.join("workloads", "traces", f"{trace_name(model, batch)}.trace.gz")
    command = [sys.executable, os.path.join("workloads", "recorder", "record.py"),
               "--model", model, "--batch", str(batch), "--steps", str(STEPS), "-o", output]
    started = time.monotonic()
    done = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"record_all.py: {' '.join(command)} failed (exit {done.returncode})")
    line = next(line for line in done.stdout.splitlines() if line.startswith("result: "))
    print(f"record_all.py: {trace_name(model, batch)} recorded in "
          f"{time.monotonic() - started:.0f} s", file=sys.stderr)
    return json.loads(line[len("result: "):])


def mib(nbytes):
    return nbytes / (1 << 20)


_INTRODUCTION = [
    "Spillway traces (format 1.2, gzip-compressed) of real PyTorch models' training steps, "
    "recorded on the CPU by `workloads/recorder/record.py` with an H100 PCIe op-time model. "
    "docs/workloads.md (\"The recorder\") says what they hold and how. Regenerate them all "
    "(about 20 minutes on two cores) with",
    "    /usr/bin/python3 workloads/recorder/record_all.py",
    "or one with `--only resnet50-b16`. `index.json` has the same figures for programs.",
    "Each trace: the model's upload (parameters and buffers), then 4 training steps, each ending "
    "with a context synchronize. Events are a step's allocations, frees and launches (the first "
    "step's leave out the model's upload before it, and include making the optimizer's state); "
    "the op time is the sum of a step's modelled kernel times; the peak is the most bytes live "
    "at once (tensor bytes, before any rounding by an allocator), and the step where it is "
    "first reached.",
]


def write_index(results):
    """index.json (every result) and README.md (the table), in TRACES' order."""
    ordered = [results[trace_name(m, b)] for m, b in TRACES if trace_name(m, b) in results]
    with open(os.path.join(TRACE_DIR, "index.json"), "w") as f:
        json.dump(ordered, f, indent=1)
        f.write("\n")
    total = sum(r["trace_bytes"] for r in ordered)
    lines = ["# Recorded training steps of real networks", ""]
    for paragraph in _INTRODUCTION:
        lines += [paragraph if paragraph.startswith("    ") else textwrap.fill(paragraph, 100), ""]
    lines += ["| trace | model | batch | events per step | launches per step | peak live | "
              "op time per step | size |",
              "|---|---|---:|---|---|---:|---|---:|"]
    for r in ordered:
        events = " / ".join(str(e) for e in r["events_per_step"])
        launches = " / ".join(str(n) for n in r["launches_per_step"])
        op_time = " / ".join(f"{t:.2f}" for t in r["op_time_ms_per_step"])
        per_step = r["peak_live_bytes_per_step"]
        peak_step = per_step.index(max(per_step)) + 1
        lines.append(f"| `{os.path.basename(r['trace'])}` | {r['description']} | {r['batch']} | "
                     f"{events} | {launches} | {mib(r['peak_live_bytes']):.0f} MiB "
                     f"(step {peak_step}) | {op_time} ms | {r['trace_bytes'] / 1024:.0f} KiB |")
    lines += ["", f"{len(ordered)} traces, {mib(total):.1f} MiB in all.", ""]
    with open(os.path.join(TRACE_DIR, "README.md"), "w") as f:
        f.write("\n".join(lines))


def main(argv):
    parser = argparse.ArgumentParser(prog="record_all.py",
                                     description="Regenerate workloads/traces/ and its index.")
    parser.add_argument("--only", action="append", metavar="MODEL-bBATCH",
                        help="record only this trace (repeatable); the others keep their entry")
    args = parser.parse_args(argv)
    known = {trace_name(m, b): (m, b) for m, b in TRACES}
    for name in args.only or []:
        if name not in known:
            parser.exit(2, f"record_all.py: unknown trace '{name}'; known: "
                           f"{', '.join(known)}\n")
    results = {}
    index = os.path.join(TRACE_DIR, "index.json")
    if args.only and os.path.exists(index):
        with open(index) as f:
            results = {trace_name(r["model"], r["batch"]): r for r in json.load(f)}
    for name, (model, batch) in known.items():
        if args.only and name not in args.only:
            continue
        print(f"record_all.py: {name}", file=sys.stderr)
        results[name] = record_one(model, batch)
        results[name]["trace"] = f"workloads/traces/{name}.trace.gz"
        write_index(results)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
