#!/usr/bin/env python3
"""Writes a calibration file (docs/calibration.md) from what the GPU check's `core` stage measured,
for simgpu (SIMGPU_CALIBRATION=FILE) and `spillway simulate` / `spillway plan` (--calibration FILE):

  --link FILE          the link's figures the bandwidth step kept (link-KIND.json: h2d_gbps,
                       d2h_gbps: managed prefetch rates where measured, else pinned copies)
  --call-costs FILE    scripts/gpu_call_costs.py's JSON lines: each call's blocked time by size
  --bandwidth FILE     optional: scripts/gpu_bandwidth.py's output, whose `result:` line gives the
                       driver's version and what a small managed allocation takes on the device
  --rates FILE         optional: the rates step's figures (rates-KIND.json, from
                       examples/driver_rates.cc): the fault batch beyond its bytes' time, per
                       2 MiB, and a launch's time on the calling thread without spillway

Only what was measured is written; what the file leaves out keeps the model's default. Each call's
blocked time is fitted as a fixed part plus a part per byte (least squares over the sizes, neither
part negative). `advise` was measured as a set and an unset: half of it is one call. An allocation
was measured with its free: the pair is charged at the allocation. The `_resident` figures (a
prefetch of data already there) are kept in the call-costs file but not modelled.

Exit status: 0 written, 1 nothing measured to write, 2 bad arguments or unreadable input.
"""

import argparse
import json
import math
import os
import sys

# gpu_call_costs.py's ops -> the calibration's calls, and how many calls one figure covers.
CALLS = {
    "prefetch_to_device": ("prefetch_to_device", 1),
    "prefetch_to_host": ("prefetch_to_host", 1),
    "discard": ("discard", 1),
    "advise": ("advise", 2),
    "alloc_managed": ("alloc_managed", 1),
    "pool_alloc": ("pool_alloc", 1),
    "mem_get_info": ("mem_get_info", 1),
}
SMALL_MANAGED_KIB = 96  # the allocation gpu_bandwidth.py measures


class InputError(Exception):
    pass


def read_json(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as error:
        raise InputError(f"{what} {path}: cannot be read: {error.strerror}") from error
    except ValueError as error:
        raise InputError(f"{what} {path}: not JSON: {error}") from error


def read_call_costs(path):
    """{op: [(bytes, blocked seconds)]} from the JSON lines (rows with an error are skipped)."""
    rows = {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except OSError as error:
        raise InputError(f"call costs {path}: cannot be read: {error.strerror}") from error
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as error:
            raise InputError(f"call costs {path}: line {number} is not JSON: {error}") from error
        if not isinstance(row, dict) or "op" not in row:
            raise InputError(f"call costs {path}: line {number} has no \"op\"")
        if "error" in row or "blocked_us" not in row:
            continue
        blocked = row["blocked_us"]
        size = row.get("bytes", 0)
        if not isinstance(blocked, (int, float)) or not math.isfinite(blocked) or blocked < 0 or \
                not isinstance(size, int) or size < 0:
            raise InputError(f"call costs {path}: line {number}: blocked_us {blocked!r} or bytes "
                             f"{size!r} is not a measurement")
        rows.setdefault(row["op"], []).append((size, blocked * 1e-6))
    return rows


def fit(points):
    """(seconds, seconds_per_byte): least squares over (bytes, seconds), neither negative."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((x - mean_x) ** 2 for x, _ in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / var if var > 0 else 0.0
    slope = max(0.0, slope)
    fixed = mean_y - slope * mean_x
    if fixed < 0:  # through the origin instead
        fixed = 0.0
        slope = sum(x * y for x, y in points) / sum(x * x for x, _ in points)
    return fixed, slope


def piece_bytes(device_kib):
    """The granule a 96 KiB managed allocation was rounded to (4 KiB up to 2 MiB), or None."""
    granule = 4
    while granule <= 2048:
        if math.ceil(SMALL_MANAGED_KIB / granule) * granule == round(device_kib):
            return granule * 1024
        granule *= 2
    return None


def bandwidth_result(path):
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line for line in f if line.startswith("result: ")]
    except OSError as error:
        raise InputError(f"bandwidth results {path}: cannot be read: {error.strerror}") from error
    if not lines:
        return {}
    try:
        return json.loads(lines[-1][len("result: "):])
    except ValueError as error:
        raise InputError(f"bandwidth results {path}: its result line is not JSON: {error}") \
            from error


def calibration(args):
    out = {"spillway_calibration": 1}
    if args.device:
        out["device"] = args.device
    if args.source:
        out["source"] = args.source
    measured = 0
    if args.link:
        link = read_json(args.link, "link figures")
        section = {}
        for key, name in (("h2d_gbps", "h2d_bytes_per_s"), ("d2h_gbps", "d2h_bytes_per_s")):
            value = link.get(key) if isinstance(link, dict) else None
            if value is None:
                continue
            if not isinstance(value, (int, float)) or not 1e-6 <= value <= 1e4:
                raise InputError(f"link figures {args.link}: {key} {value!r} is not a bandwidth "
                                 "in GB/s")
            section[name] = value * 1e9
        if section:
            out["link"] = section
            measured += len(section)
    if args.bandwidth:
        result = bandwidth_result(args.bandwidth)
        version = result.get("driver_version")
        if isinstance(version, int) and version > 0:
            out["driver_version"] = version
        device_kib = result.get("small_managed_device_kib")
        if isinstance(device_kib, (int, float)) and piece_bytes(device_kib) is not None:
            out["granule"] = {"piece_bytes": piece_bytes(device_kib)}
            measured += 1
    if args.rates:
        rates = read_json(args.rates, "rates")
        batch = rates.get("fault_batch_us") if isinstance(rates, dict) else None
        launch = rates.get("launch_host_us") if isinstance(rates, dict) else None
        for key, value in (("fault_batch_us", batch), ("launch_host_us", launch)):
            if value is not None and (not isinstance(value, (int, float)) or
                                      not 0 <= value <= 1e6):
                raise InputError(f"rates {args.rates}: {key} {value!r} is not a time in µs")
        if batch is not None:
            out["faults"] = {"batch_seconds": batch * 1e-6, "batch_bytes": 2 << 20}
            measured += 1
        if launch is not None:
            out.setdefault("calls", {})["launch"] = {"seconds": launch * 1e-6,
                                                     "seconds_per_byte": 0.0}
            measured += 1
    if args.call_costs:
        calls = {}
        for op, points in sorted(read_call_costs(args.call_costs).items()):
            if op not in CALLS:
                continue
            name, per = CALLS[op]
            fixed, slope = fit(points)
            calls[name] = {"seconds": fixed / per, "seconds_per_byte": slope / per}
        if calls:
            out.setdefault("calls", {}).update(calls)
            measured += len(calls)
    return out, measured


def main(argv):
    parser = argparse.ArgumentParser(description="A calibration file from the GPU check's "
                                     "measurements (docs/calibration.md).")
    parser.add_argument("--link", help="link-KIND.json (the bandwidth step's figures)")
    parser.add_argument("--call-costs", help="gpu_call_costs.py's JSON lines")
    parser.add_argument("--bandwidth", help="gpu_bandwidth.py's output (its result: line)")
    parser.add_argument("--rates", help="rates-KIND.json (the rates step's figures)")
    parser.add_argument("--device", help="what it was measured on (nvidia-smi's name)")
    parser.add_argument("--source", help="how it was measured (the command, the date)")
    parser.add_argument("-o", "--output", required=True, help="the calibration file to write")
    args = parser.parse_args(argv)
    for path in (args.link, args.call_costs, args.bandwidth, args.rates):
        if path and os.path.abspath(path) == os.path.abspath(args.output):
            parser.error(f"-o {args.output} is one of the inputs")
    try:
        out, measured = calibration(args)
    except InputError as error:
        print(f"gpu_calibration.py: {error}", file=sys.stderr)
        return 2
    if measured == 0:
        print("gpu_calibration.py: nothing measured to write (no link figures, rates or call costs)",
              file=sys.stderr)
        return 1
    text = json.dumps(out, indent=2) + "\n"
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as error:
        print(f"gpu_calibration.py: -o {args.output}: cannot be written: {error.strerror}",
              file=sys.stderr)
        return 2
    print(f"wrote {args.output}: {measured} figures measured; the rest keep the model's defaults")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
