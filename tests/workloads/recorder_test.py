#!/usr/bin/env python3
"""Tests the recorder of real networks' training steps (workloads/recorder/) on a small CNN.

Records 4 training steps of the recorder's tiny_cnn on the CPU, has spillway-inspect read the
trace, and reads the trace back itself (a reader of its own, written from docs/trace-format.md)
to check what the recorder promises: storage lifetimes as a stream-ordered allocator sees them
(activations freed during backward, interleaved with its launches; the same bytes live at the
end of every step after the first), a synchronize at the end of each step, access modes (a
convolution's output written, an in-place ReLU and the optimizer's parameter updates
read-write, the model's upload written), and a consistent allocation space.
Also the command line's refusals. PyTorch missing is a failure: scripts/setup.sh installs it.

    recorder_test.py --source REPO --inspect build/out/spillway-inspect
"""

import argparse
import gzip
import os
import struct
import subprocess
import sys
import tempfile

STEPS = 4


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


# --- a reader of the records the recorder writes -----------------------------------------------

class Reader:
    def __init__(self, data):
        self.data = data
        self.at = 0

    def take(self, fmt):
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values

    def text(self):
        (n,) = self.take("I")
        value = self.data[self.at:self.at + n].decode("utf-8")
        self.at += n
        return value


def read_trace(path):
    """The trace's version and its records as (kind, dict) tuples, the end record last."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    check(data[:8] == b"SPWTRACE", f"{path}: no SPWTRACE magic")
    major, minor, preamble = struct.unpack_from("<HHI", data, 8)
    records = []
    at = preamble
    while at < len(data):
        kind, flags, length = struct.unpack_from("<HHI", data, at)
        check(flags == 0, f"record at byte {at}: flags {flags}")
        payload = Reader(data[at + 8:at + 8 + length])
        check(at + 8 + length <= len(data), f"record at byte {at} runs past the file")
        at += 8 + length
        records.append((kind, decode(kind, payload)))
        check(payload.at == length or kind not in (1, 2, 5, 6, 7, 10, 13, 16),
              f"kind {kind} record at byte {at}: {length - payload.at} bytes left over")
    return (major, minor), records


def decode(kind, r):
    if kind == 1:
        job, device, cuda, driver, version = (r.text() for _ in range(5))
        memory, start, start_unix, pid = r.take("QQQI")
        return dict(job=job, device=device, version=version, memory=memory)
    if kind == 2:
        (string_id,) = r.take("I")
        return dict(id=string_id, text=r.text())
    if kind == 5:
        time, thread, alloc_kind, address, nbytes, stream, site, alloc_id = r.take("QIBQQQQQ")
        return dict(time=time, kind=alloc_kind, address=address, bytes=nbytes, stream=stream,
                    id=alloc_id)
    if kind == 6:
        time, thread, address, alloc_id, stream = r.take("QIQQQ")
        return dict(time=time, address=address, id=alloc_id, stream=stream)
    if kind == 7:
        fields = r.take("QIQQI3I3IIQ")
        (count,) = r.take("I")
        accesses = [r.take("QQQ") for _ in range(count)]
        (mode_count,) = r.take("I")
        modes = list(r.data[r.at:r.at + mode_count])
        r.at += mode_count
        return dict(time=fields[0], thread=fields[1], stream=fields[2], function=fields[3],
                    name_id=fields[4], correlation=fields[12], accesses=accesses, modes=modes)
    if kind == 10:
        time, end, thread, what, handle = r.take("QQIBQ")
        return dict(time=time, end=end, what=what)
    if kind == 13:
        correlation, start, end, device, stream, activity, source = r.take("QQQIQBB")
        return dict(correlation=correlation, start=start, end=end, activity=activity,
                    source=source)
    if kind == 16:
        end, written, dropped = r.take("QQQ")
        return dict(written=written, dropped=dropped)
    return {}


# --- the checks ---------------------------------------------------------------------------------

def check_format(version, records):
    check(version == (1, 2), f"format {version[0]}.{version[1]}, want 1.2")
    check(records[0][0] == 1, "the first record is not the header")
    header = records[0][1]
    check(header["job"].startswith("tiny_cnn batch 4, 4 training steps"), header["job"])
    check(header["version"] == "0.1.0", header["version"])
    kind, end = records[-1]
    check(kind == 16, "the last record is not the end record")
    check(end["written"] == len(records) - 1 and end["dropped"] == 0,
          f"end record: {end}, {len(records) - 1} records before it")


def check_allocations(records):
    """Ids unique and not 0, addresses 512-aligned and apart while live, frees of live ones,
    accesses inside live allocations, modes one per access, a kernel time per launch."""
    live = {}
    seen = set()
    times = {}
    previous_time = 0
    for kind, r in records:
        if kind == 5:
            check(r["id"] != 0 and r["id"] not in seen, f"allocation id {r['id']} reused")
            check(r["kind"] == 2 and r["stream"] == 1, f"allocation {r['id']}: not async on 1")
            check(r["address"] % 512 == 0, f"allocation {r['id']}: address not 512-aligned")
            for other in live.values():
                check(r["address"] + r["bytes"] <= other["address"] or
                      other["address"] + other["bytes"] <= r["address"],
                      f"allocation {r['id']} overlaps live allocation {other['id']}")
            seen.add(r["id"])
            live[r["id"]] = r
        elif kind == 6:
            check(r["id"] in live, f"free of allocation {r['id']}, which is not live")
            check(live[r["id"]]["address"] == r["address"], f"free {r['id']}: address")
            del live[r["id"]]
        elif kind == 7:
            check(len(r["modes"]) == len(r["accesses"]), "launch: modes not one per access")
            check(r["stream"] == 1 and r["thread"] == 1, "launch not on stream 1, thread 1")
            for (alloc_id, offset, nbytes), mode in zip(r["accesses"], r["modes"]):
                check(alloc_id in live, f"launch {r['correlation']} touches allocation "
                      f"{alloc_id}, which is not live")
                check(0 < nbytes and offset + nbytes <= live[alloc_id]["bytes"],
                      f"launch {r['correlation']}: access {offset}+{nbytes} outside "
                      f"allocation {alloc_id} of {live[alloc_id]['bytes']} bytes")
                check(mode in (1, 2, 3), f"launch {r['correlation']}: mode {mode}")
            times[r["correlation"]] = None
        elif kind == 13:
            check(r["correlation"] in times, f"kernel time of unknown launch {r['correlation']}")
            check(r["activity"] == 0 and r["source"] == 1, "kernel time: not a kernel by events")
            check(r["start"] >= previous_time and r["end"] > r["start"],
                  f"kernel time {r['correlation']} not after the previous one")
            previous_time = r["end"]
            times[r["correlation"]] = r
    check(all(t is not None for t in times.values()), "a launch has no kernel time")


def check_steady(records):
    """The same bytes live at the end of every step after the first (which makes the
    optimizer's state): nothing leaks from step to step."""
    live = {}
    at_sync = []
    for kind, r in records:
        if kind == 5:
            live[r["id"]] = r["bytes"]
        elif kind == 6:
            del live[r["id"]]
        elif kind == 10:
            at_sync.append(sum(live.values()))
    check(len(set(at_sync[1:])) == 1, f"bytes live at each step's end: {at_sync}")


def split_steps(records):
    """The records of each step, each ending with its synchronize (the first step begins with
    the model's setup: no synchronize comes between them, as in a training loop)."""
    parts = [[]]
    for kind, r in records[1:-1]:
        parts[-1].append((kind, r))
        if kind == 10:
            check(r["what"] == 0, "a synchronize that is not of the context")
            parts.append([])
    check(len(parts) == STEPS + 1, f"{len(parts) - 1} synchronizes, want one per step ({STEPS})")
    check(not any(kind in (5, 6, 7) for kind, _ in parts[-1]),
          "allocations, frees or launches after the last step's synchronize")
    return parts[:STEPS]


def check_steps(records):
    names = {r["id"]: r["text"] for kind, r in records if kind == 2}
    steps = split_steps(records)

    # The first launches upload the model, then the first batch (images, labels): each writes
    # one allocation.
    uploads = []
    for kind, r in steps[0]:
        if kind == 7:
            if names[r["name_id"]] != "aten::_to_copy":
                break
            check(r["modes"] == [2], f"an upload's modes are {r['modes']}, want [2]")
            uploads.append(r)
    check(len(uploads) > 2, "the first step does not begin with the model's upload")
    parameters = {r["accesses"][0][0] for r in uploads[:-2]}

    for number, step in enumerate(steps, 1):
        launches = [(i, r) for i, (kind, r) in enumerate(step) if kind == 7]
        backward = [i for i, r in launches if names[r["name_id"]].endswith("_backward")]
        check(backward, f"step {number}: no backward launches")
        first_backward, last_backward = backward[0], backward[-1]
        forward_allocations = {r["id"] for kind, r in step[:first_backward] if kind == 5}
        freed_in_backward = [r["id"] for kind, r in step[first_backward:last_backward]
                             if kind == 6 and r["id"] in forward_allocations]
        freed_after = [r["id"] for kind, r in step[last_backward:]
                       if kind == 6 and r["id"] in forward_allocations]
        check(len(freed_in_backward) >= 8 and len(freed_in_backward) > len(freed_after),
              f"step {number}: {len(freed_in_backward)} of the forward's allocations freed "
              f"between backward launches, {len(freed_after)} after the last: activations "
              "are not freed as autograd releases them")

        def launches_named(name):
            return [r for _, r in launches if names[r["name_id"]] == name]

        convolutions = launches_named("aten::convolution")
        check(len(convolutions) == 2, f"step {number}: {len(convolutions)} convolutions")
        for r in convolutions:
            output = max(a[0] for a in r["accesses"])   # made just before: the highest id
            modes = dict(zip((a[0] for a in r["accesses"]), r["modes"]))
            check(modes[output] == 2 and sorted(modes.values()) == [1, 1, 1, 2],
                  f"step {number}: convolution modes {r['modes']}, want its output written "
                  "and its input, weight and bias read")
        relus = launches_named("aten::relu_")
        check(len(relus) == 2 and all(r["modes"] == [3] for r in relus),
              f"step {number}: in-place ReLU modes {[r['modes'] for r in relus]}, want [3]")
        updated = set()
        for _, r in (item for item in launches if item[0] > last_backward):
            for (alloc_id, _, _), mode in zip(r["accesses"], r["modes"]):
                if alloc_id in parameters and mode == 3:
                    updated.add(alloc_id)
        trainable = parameters - running_stats(parameters, names, steps[1])
        check(trainable <= updated, f"step {number}: {len(trainable - updated)} parameters "
              "not updated read-write by the optimizer")


def running_stats(uploaded, names, step):
    """The uploaded tensors that batch norm updates in the forward (running mean, variance and
    batch count), which the optimizer does not touch."""
    first_backward = next(i for i, (kind, r) in enumerate(step)
                          if kind == 7 and names[r["name_id"]].endswith("_backward"))
    in_forward = set()
    for kind, r in step[:first_backward]:
        if kind == 7:
            for (alloc_id, _, _), mode in zip(r["accesses"], r["modes"]):
                if alloc_id in uploaded and mode == 3:
                    in_forward.add(alloc_id)
    return in_forward


# --- the runs -----------------------------------------------------------------------------------

def python_with_torch():
    """A python3 that imports torch and torchvision: this one, Debian's, or the first on PATH."""
    candidates = [sys.executable, "/usr/bin/python3", "python3"]
    for python in candidates:
        try:
            done = subprocess.run([python, "-c", "import torch, torchvision"],
                                  capture_output=True, timeout=120)
        except OSError:
            continue
        if done.returncode == 0:
            return python
    raise Failure("PyTorch is missing: none of " + ", ".join(candidates) + " imports torch and "
                  "torchvision; install Debian's python3-torch and python3-torchvision "
                  "(scripts/setup.sh does)")


def run(command, want_rc=0):
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != want_rc:
        raise Failure(f"{' '.join(command)}: exit {done.returncode}, want {want_rc}\n"
                      f"{done.stdout}{done.stderr}")
    return done


def check_refusals(python, record, scratch):
    done = run([python, record, "--model", "no_such_model", "-o", f"{scratch}/x.trace"], 2)
    lines = done.stderr.strip().splitlines()
    check(len(lines) == 1 and "unknown model 'no_such_model'" in lines[0] and
          "resnet50" in lines[0], f"unknown model: {done.stderr!r}")
    for output, words in ((scratch, "is a folder"), ("/dev/null", "not a regular file"),
                          (f"{scratch}/missing/x.trace", "does not exist")):
        done = run([python, record, "--model", "tiny_cnn", "-o", output], 2)
        lines = done.stderr.strip().splitlines()
        check(len(lines) == 1 and words in lines[0], f"-o {output}: {done.stderr!r}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", required=True, help="the repository's root")
    parser.add_argument("--inspect", required=True, help="spillway-inspect")
    args = parser.parse_args()
    record = os.path.join(args.source, "workloads", "recorder", "record.py")
    scratch = tempfile.mkdtemp(prefix="recorder_test.")
    try:
        python = python_with_torch()
        trace = os.path.join(scratch, "tiny_cnn-b4.trace.gz")
        run([python, record, "--model", "tiny_cnn", "--batch", "4", "--steps", str(STEPS),
             "-o", trace])
        plain = os.path.join(scratch, "tiny_cnn-b4.trace")
        with gzip.open(trace, "rb") as f, open(plain, "wb") as out:
            out.write(f.read())
        for path in (trace, plain):
            shown = run([args.inspect, path]).stdout
            check("spillway trace 1.2" in shown and "dropped   0" in shown,
                  f"spillway-inspect {path}:\n{shown}")
        print(next((line for line in shown.splitlines() if line.startswith("step:")),
                   "spillway-inspect shows no step line"))
        version, records = read_trace(trace)
        check_format(version, records)
        check_allocations(records)
        check_steady(records)
        check_steps(records)
        check_refusals(python, record, scratch)
    except Failure as failure:
        print(f"recorder_test: FAILED: {failure}", file=sys.stderr)
        print(f"recorder_test: what it made is in {scratch}", file=sys.stderr)
        return 1
    print(f"recorder_test: passed ({len(records)} records, {STEPS} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
