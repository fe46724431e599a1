#!/usr/bin/env python3
"""What each driver call the residency engine makes costs on this machine's GPU 0, through the
CUDA driver API itself (scripts/cuda_driver.py), for scripts/gpu_check.sh and for simgpu's
calibration: per call, the time the calling thread is blocked in it and the time until its work is
done (the call, then cuStreamSynchronize), the median of --repeats, at sizes from 64 KiB up to
--max-size:

  prefetch_to_device          managed data on the host, prefetched to the device
  prefetch_to_device_resident the same data, already on the device
  prefetch_to_host            managed data on the device, prefetched to the host
  prefetch_to_host_resident   the same data, already on the host
  discard                     cuMemDiscardBatchAsync of data on the device (CUDA 13.0+)
  prefetch_16_calls           the data on the host prefetched to the device in 16 calls of a
                              sixteenth each (the engine's way: a call per chunk or allocation)
  prefetch_batch_16           the same as one cuMemPrefetchBatchAsync of 16 ranges (CUDA 13.0+):
                              with prefetch_16_calls, whether batching the engine's calls pays
  advise                      cuMemAdvise, preferred location the device, then unset
  alloc_managed               cuMemAllocManaged then cuMemFree (blocked only)
  pool_alloc                  cuMemAllocAsync then cuMemFreeAsync on the stream
  mem_get_info                cuMemGetInfo (once, no size)

Each figure is printed as a JSON line as soon as it is measured, and appended to --results FILE
when given, so a run cut short keeps what it measured. A call the driver lacks or refuses is a
line with "error". Exit status: 0 measured, 1 no GPU (or nothing measured), 3 no driver, 2 bad
arguments.
"""

import argparse
import ctypes
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_driver import (CU_MEM_ADVISE_SET_PREFERRED_LOCATION,  # noqa: E402
                         CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, CUmemLocation, Driver,
                         DriverError, location)

SIZES = [64 << 10, 1 << 20, 16 << 20, 256 << 20]


def parse_size(text):
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for unit, factor in units.items():
        if text.endswith(unit):
            return int(text[:-len(unit)]) * factor
    return int(text)


def measure(driver, stream, repeats, setup, call, waits=True):
    """Medians (µs) of the time `call` blocks its thread and, when `waits`, of the time until the
    stream has done its work; `setup` runs before each, untimed."""
    blocked, complete = [], []
    for _ in range(repeats):
        setup()
        driver.sync(stream)
        start = time.perf_counter()
        call()
        returned = time.perf_counter()
        if waits:
            driver.sync(stream)
        done = time.perf_counter()
        blocked.append((returned - start) * 1e6)
        complete.append((done - start) * 1e6)
    out = {"blocked_us": round(statistics.median(blocked), 2)}
    if waits:
        out["complete_us"] = round(statistics.median(complete), 2)
    return out


class Results:
    """Prints each figure as a JSON line and appends it to the results file at once."""

    def __init__(self, path):
        self.path = path
        self.rows = []

    def add(self, row):
        self.rows.append(row)
        line = json.dumps(row)
        print(line, flush=True)
        if self.path:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line + "\n")


def sized_calls(driver, stream, size, repeats, results):
    """The calls whose cost depends on the bytes, on one managed range of `size` bytes."""
    pointer = driver.alloc_managed(size)
    try:
        driver.fill(pointer, size, stream)
        driver.sync(stream)

        def on(to_device):
            return lambda: driver.prefetch(pointer, size, to_device, stream)

        cases = [
            ("prefetch_to_device", on(False), on(True)),
            ("prefetch_to_device_resident", on(True), on(True)),
            ("prefetch_to_host", on(True), on(False)),
            ("prefetch_to_host_resident", on(False), on(False)),
        ]
        if driver.has("cuMemDiscardBatchAsync"):
            pointers = (ctypes.c_uint64 * 1)(pointer)
            sizes = (ctypes.c_size_t * 1)(size)

            def refill():
                driver.prefetch(pointer, size, True, stream)
                driver.fill(pointer, size, stream)

            cases.append(("discard", refill, lambda: driver.call(
                "cuMemDiscardBatchAsync", pointers, sizes, ctypes.c_size_t(1),
                ctypes.c_ulonglong(0), stream)))
        for op, setup, call in cases:
            row = {"op": op, "bytes": size}
            try:
                row.update(measure(driver, stream, repeats, setup, call))
            except DriverError as error:
                row["error"] = str(error)
            results.add(row)
        if not driver.has("cuMemDiscardBatchAsync"):
            results.add({"op": "discard", "bytes": size,
                         "error": "the driver has no cuMemDiscardBatchAsync (CUDA 13.0+)"})
        # Sixteen ranges, as sixteen calls and as one batch call.
        part = size // 16
        starts = [pointer + i * part for i in range(16)]

        def sixteen_calls():
            for start in starts:
                driver.prefetch(start, part, True, stream)

        row = {"op": "prefetch_16_calls", "bytes": size, "calls": 16}
        try:
            row.update(measure(driver, stream, repeats, on(False), sixteen_calls))
        except DriverError as error:
            row["error"] = str(error)
        results.add(row)
        row = {"op": "prefetch_batch_16", "bytes": size, "ranges": 16}
        if driver.has("cuMemPrefetchBatchAsync"):
            pointers = (ctypes.c_uint64 * 16)(*starts)
            sizes = (ctypes.c_size_t * 16)(*([part] * 16))
            locations = (CUmemLocation * 1)(location(True))
            location_indices = (ctypes.c_size_t * 1)(0)

            def batch():
                driver.call("cuMemPrefetchBatchAsync", pointers, sizes, ctypes.c_size_t(16),
                            locations, location_indices, ctypes.c_size_t(1),
                            ctypes.c_ulonglong(0), stream)
            try:
                row.update(measure(driver, stream, repeats, on(False), batch))
            except DriverError as error:
                row["error"] = str(error)
        else:
            row["error"] = "the driver has no cuMemPrefetchBatchAsync (CUDA 13.0+)"
        results.add(row)

        def advise():
            driver.call("cuMemAdvise_v2", ctypes.c_uint64(pointer), ctypes.c_size_t(size),
                        CU_MEM_ADVISE_SET_PREFERRED_LOCATION, location(True))
            driver.call("cuMemAdvise_v2", ctypes.c_uint64(pointer), ctypes.c_size_t(size),
                        CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, location(True))

        row = {"op": "advise", "bytes": size, "calls": 2}
        try:
            row.update(measure(driver, stream, repeats, lambda: None, advise, waits=False))
        except DriverError as error:
            row["error"] = str(error)
        results.add(row)
    finally:
        driver.free(pointer)

    def alloc_free():
        driver.free(driver.alloc_managed(size))

    row = {"op": "alloc_managed", "bytes": size, "calls": 2}
    row.update(measure(driver, stream, repeats, lambda: None, alloc_free, waits=False))
    results.add(row)

    def pool_alloc_free():
        fresh = ctypes.c_uint64()
        driver.call("cuMemAllocAsync", ctypes.byref(fresh), ctypes.c_size_t(size), stream)
        driver.call("cuMemFreeAsync", fresh, stream)

    row = {"op": "pool_alloc", "bytes": size, "calls": 2}
    try:
        row.update(measure(driver, stream, repeats, lambda: None, pool_alloc_free))
    except DriverError as error:
        row["error"] = str(error)
    results.add(row)


def main(argv):
    parser = argparse.ArgumentParser(description="Per-call costs of the driver calls the engine "
                                     "makes, on GPU 0, through the CUDA driver API.")
    parser.add_argument("--repeats", type=int, default=5, help="calls per figure (5)")
    parser.add_argument("--max-size", default="256MiB",
                        help="largest size measured (256MiB; sizes: 64KiB, 1MiB, 16MiB, 256MiB)")
    parser.add_argument("--results", help="append each figure to this file as a JSON line")
    args = parser.parse_args(argv)
    try:
        max_size = parse_size(args.max_size)
    except ValueError:
        parser.error(f"--max-size: '{args.max_size}' is not a size (64KiB, 16MiB, ...)")
    if args.repeats < 1 or max_size < SIZES[0]:
        parser.error("--repeats must be at least 1 and --max-size at least 64KiB")
    try:
        driver = Driver()
    except OSError as error:
        print(f"gpu_call_costs.py: no CUDA driver: {error}", file=sys.stderr)
        return 3
    results = Results(args.results)
    try:
        stream = driver.start()
        row = {"op": "mem_get_info", "driver_version": driver.version}
        row.update(measure(driver, stream, args.repeats, lambda: None, driver.free_memory,
                           waits=False))
        results.add(row)
        for size in SIZES:
            if size <= max_size:
                sized_calls(driver, stream, size, args.repeats, results)
    except DriverError as error:
        print(f"gpu_call_costs.py: {error}", file=sys.stderr)
        return 1 if not results.rows else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
