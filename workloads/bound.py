#!/usr/bin/env python3
"""An independent lower bound on a recorded model's step time under oversubscription.

Reads a spillway trace (docs/trace-format.md, plain or gzip-compressed) as the recorder writes it
(workloads/recorder/: allocations, frees, launches with access modes and kernel times, a context
synchronize ending each training step), repeats its last recorded step, and runs farthest-next-use
eviction (Belady's choice) at allocation granularity over a device of the given capacity:

  - before each launch every allocation it touches must be resident; one that is not comes in
    over the link unless the launch only writes it (mode 2) or it holds no data yet (never
    written since it was allocated);
  - room is made by evicting, among the resident allocations the launch does not touch, the one
    whose next use is farthest; its bytes go out over the link unless it is dead (freed before
    it is used again) or holds no data;
  - a free drops the allocation from the device at no cost.

The bound is max(compute, bytes in / H2D bandwidth, bytes out / D2H bandwidth) for one steady
step (the cheapest of the middle steps of five): transfers perfectly overlapped with compute and
with each other. It is the issue's "farthest-next-use bound at allocation granularity"; it is not
optimal for allocations of unequal sizes, and it ignores that a byte can come in only once room
is free, so it is a target rather than a proof. A launch whose own accesses exceed the capacity
gets them counted as brought in and sent out again (it must stream them).

Usage: workloads/bound.py TRACE --device-memory BYTES|--factor F [--bandwidth GBps] [--json]
"""

import argparse
import gzip
import json
import struct
import sys

_MAGIC = b"SPWTRACE"
_ALLOC, _FREE, _LAUNCH, _SYNC, _KTIME, _END = 5, 6, 7, 10, 13, 16
_READ, _WRITE = 1, 2


class TraceError(Exception):
    pass


def _read_bytes(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise TraceError("%s: %s" % (path, e.strerror or e)) from e
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise TraceError("%s: corrupt gzip data: %s" % (path, e)) from e
    return data


def read_trace(path):
    """The trace's events in order: ('alloc', id, bytes), ('free', id), ('launch', corr,
    [(id, offset, bytes, mode)]), ('sync',); and {correlation: seconds} from the kernel times."""
    data = _read_bytes(path)
    if data[:8] != _MAGIC:
        raise TraceError("%s: not a spillway trace (no SPWTRACE magic at byte 0)" % path)
    major, _minor, pre = struct.unpack_from("<HHI", data, 8)
    if major != 1:
        raise TraceError("%s: trace format %d.x is not readable (this reads 1.x)" % (path, major))
    events, times = [], {}
    at, ended = pre, False
    while at < len(data):
        if at + 8 > len(data):
            raise TraceError("%s: truncated trace at byte %d" % (path, at))
        kind, _flags, length = struct.unpack_from("<HHI", data, at)
        p, end = at + 8, at + 8 + length
        if end > len(data):
            raise TraceError("%s: truncated trace at byte %d" % (path, at))
        if kind == _ALLOC:
            _t, _th, _k, _addr, nbytes, _s, _cs, aid = struct.unpack_from("<QIBQQQQQ", data, p)
            events.append(("alloc", aid, nbytes))
        elif kind == _FREE:
            _t, _th, _addr, aid, _s = struct.unpack_from("<QIQQQ", data, p)
            events.append(("free", aid))
        elif kind == _LAUNCH:
            q = p + 8 + 4 + 8 + 8 + 4 + 12 + 12 + 4
            (corr,) = struct.unpack_from("<Q", data, q)
            q += 8
            (n,) = struct.unpack_from("<I", data, q)
            q += 4
            acc = [struct.unpack_from("<QQQ", data, q + 24 * i) for i in range(n)]
            q += 24 * n
            modes = [0] * n
            if q < end:
                (m,) = struct.unpack_from("<I", data, q)
                if m == n:
                    modes = list(data[q + 4:q + 4 + n])
            events.append(("launch", corr, [(a, o, b, md) for (a, o, b), md in zip(acc, modes)]))
        elif kind == _SYNC:
            events.append(("sync",))
        elif kind == _KTIME:
            corr, start, stop = struct.unpack_from("<QQQ", data, p)
            times[corr] = max(0, stop - start) * 1e-9
        elif kind == _END:
            ended = True
        at = end
    if not ended:
        raise TraceError("%s: truncated trace: no end record" % path)
    return events, times


def split_steps(path, events):
    """(prologue, [step events...]) split at the synchronize records."""
    steps, current = [], []
    for e in events:
        if e[0] == "sync":
            steps.append(current)
            current = []
        else:
            current.append(e)
    if len(steps) < 2:
        raise TraceError("%s: fewer than two training steps (a context synchronize ends each)" %
                         path)
    return steps


def steady_sequence(path, events, repeats):
    """The trace's events up to its last step, then the last step repeated `repeats` times with
    fresh ids for what it allocates; returns (sequence, index where each step starts)."""
    steps = split_steps(path, events)
    head = [e for s in steps[:-1] for e in s]
    last, before = steps[-1], steps[-2]
    if [e[0] for e in last] != [e[0] for e in before]:
        raise TraceError("%s: the last two steps differ in their events; cannot repeat the last" %
                         path)
    # Allocations of the last step by position; a free of one made in the step before maps to the
    # one the previous repetition made at the same position.
    made_before = {e[1]: i for i, e in enumerate(before) if e[0] == "alloc"}
    seq, starts = list(head), []
    own_ids = {i: e[1] for i, e in enumerate(last) if e[0] == "alloc"}  # the previous repetition's
    next_id = 1 + max([e[1] for e in events if e[0] == "alloc"] + [0])
    made_last = {e[1]: i for i, e in enumerate(last) if e[0] == "alloc"}
    for r in range(repeats):
        starts.append(len(seq))
        if r == 0:
            seq.extend(last)
            continue
        ids = {}
        for i, e in enumerate(last):
            if e[0] == "alloc":
                ids[i] = next_id
                next_id += 1

        def rename(aid, ids=ids):
            if aid in made_last:
                return ids[made_last[aid]]
            if aid in made_before:  # made by the step before: the previous repetition's
                return own_ids[made_before[aid]]
            return aid

        for i, e in enumerate(last):
            if e[0] == "alloc":
                seq.append(("alloc", ids[i], e[2]))
            elif e[0] == "free":
                seq.append(("free", rename(e[1])))
            else:
                seq.append(("launch", e[1], [(rename(a), o, b, m) for a, o, b, m in e[2]]))
        own_ids = ids
    return seq, starts


def farthest_next_use(seq, starts, capacity, times):
    """Per repetition: (bytes in, bytes out, compute seconds)."""
    size, uses = {}, {}
    for i, e in enumerate(seq):
        if e[0] == "alloc":
            size[e[1]] = e[2]
        elif e[0] == "launch":
            for a, _o, _b, _m in e[2]:
                uses.setdefault(a, []).append(i)
    cursor = {a: 0 for a in uses}

    def next_use(a, i):
        u = uses.get(a)
        if not u:
            return float("inf")
        k = cursor[a]
        while k < len(u) and u[k] <= i:
            k += 1
        cursor[a] = k
        return u[k] if k < len(u) else float("inf")

    resident, has_data, used = set(), set(), 0
    per_step = [[0, 0, 0.0] for _ in starts]
    step = -1
    for i, e in enumerate(seq):
        while step + 1 < len(starts) and i >= starts[step + 1]:
            step += 1
        acc = per_step[step] if step >= 0 else [0, 0, 0.0]
        if e[0] == "alloc":
            continue
        if e[0] == "free":
            if e[1] in resident:
                resident.discard(e[1])
                used -= size[e[1]]
            has_data.discard(e[1])
            continue
        touched = {}
        for a, _o, _b, m in e[2]:
            if a in size:
                touched[a] = touched.get(a, 0) | (m or 3)
        acc[2] += times.get(e[1], 0.0)
        need = sum(size[a] for a in touched if a not in resident)
        if need + used > capacity:
            victims = sorted((next_use(a, i), a) for a in resident if a not in touched)
            while need + used > capacity and victims:
                when, v = victims.pop()
                resident.discard(v)
                used -= size[v]
                if when != float("inf") and v in has_data:
                    acc[1] += size[v]
        for a, mode in touched.items():
            if a not in resident:
                if a in has_data and mode != _WRITE:
                    acc[0] += size[a]
                resident.add(a)
                used += size[a]
            if mode & _WRITE:
                has_data.add(a)
            elif mode == _READ and a not in has_data:
                has_data.add(a)  # read before written (an input filled on the host): data now
        if used > capacity:  # the launch alone is over the device: it streams its own data
            over = used - capacity
            acc[0] += over
            acc[1] += over
    return per_step


def bound(path, capacity, bandwidth, repeats=5):
    events, times = read_trace(path)
    seq, starts = steady_sequence(path, events, repeats)
    rows = farthest_next_use(seq, starts, capacity, times)
    best = None
    for bytes_in, bytes_out, compute in rows[1:-1]:
        t = max(compute, bytes_in / bandwidth, bytes_out / bandwidth)
        if best is None or t < best[0]:
            best = (t, bytes_in, bytes_out, compute)
    return {"bound_s": best[0], "bytes_in": best[1], "bytes_out": best[2], "compute_s": best[3]}


def peak_live_bytes(path):
    events, _ = read_trace(path)
    live, size, peak = 0, {}, 0
    for e in events:
        if e[0] == "alloc":
            size[e[1]] = e[2]
            live += e[2]
            peak = max(peak, live)
        elif e[0] == "free" and e[1] in size:
            live -= size.pop(e[1])
    return peak


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace")
    parser.add_argument("--device-memory", type=int, help="device capacity in bytes")
    parser.add_argument("--factor", type=float, help="capacity = peak live bytes / FACTOR")
    parser.add_argument("--bandwidth", type=float, default=45.0,
                        help="link bandwidth each way in GB/s (default 45)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if (args.device_memory is None) == (args.factor is None):
        parser.error("give exactly one of --device-memory and --factor")
    if args.factor is not None and not args.factor >= 1:
        parser.error("--factor must be at least 1, got %s" % args.factor)
    if not 0 < args.bandwidth < 1e4:
        parser.error("--bandwidth must be in (0, 10000) GB/s, got %s" % args.bandwidth)
    try:
        capacity = args.device_memory
        if capacity is None:
            capacity = int(peak_live_bytes(args.trace) / args.factor)
        result = bound(args.trace, capacity, args.bandwidth * 1e9)
    except TraceError as e:
        sys.exit("bound.py: %s" % e)
    result["capacity"] = capacity
    if args.json:
        print(json.dumps(result))
    else:
        print("capacity %.1f MiB: bound %.3f ms (compute %.3f ms, in %.1f MiB, out %.1f MiB)" %
              (capacity / 2**20, result["bound_s"] * 1e3, result["compute_s"] * 1e3,
               result["bytes_in"] / 2**20, result["bytes_out"] / 2**20))


if __name__ == "__main__":
    main()
