#!/usr/bin/env python3
"""Measures host<->device bandwidth on this machine's GPU 0 for scripts/gpu_check.sh, through the
CUDA driver API itself (libcuda.so.1 by ctypes; no framework, no wrapper's deprecated forms):
pinned and pageable copies (cuMemcpyHtoDAsync / cuMemcpyDtoHAsync), managed-memory prefetch to
the device and to the host (cuMemPrefetchAsync with a CUmemLocation, CUDA 12.2+, else the form
with a device ordinal) - how spillway moves data - and what a small managed allocation takes on
the device once resident.

Prints a table, then one `result:` line with a JSON object: the `_gbps` figures are 10^9 bytes/s,
the `_kib` ones KiB, `driver_version` the driver's CUDA version (13000 = 13.0).
Exit status: 0 measured, 1 no GPU (or a driver call failed: the line says which), 3 no driver
(libcuda.so.1 cannot be loaded), 2 bad arguments.
"""

import argparse
import ctypes
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_driver import CU_MEMHOSTALLOC_PORTABLE, Driver, DriverError  # noqa: E402


def timed(driver, stream, repeats, operation):
    """The median seconds of `operation` (run then waited for), its first run left out."""
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        operation()
        driver.call("cuStreamSynchronize", stream)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def copies(driver, stream, size, repeats):
    """Pinned (cuMemHostAlloc) and pageable (plain host memory) copies both ways."""
    out = {}
    device = ctypes.c_uint64()
    driver.call("cuMemAlloc_v2", ctypes.byref(device), ctypes.c_size_t(size))
    pinned = ctypes.c_void_p()
    driver.call("cuMemHostAlloc", ctypes.byref(pinned), ctypes.c_size_t(size),
                CU_MEMHOSTALLOC_PORTABLE)
    pageable = ctypes.create_string_buffer(size)
    try:
        for kind, host in (("pinned", pinned.value), ("pageable", ctypes.addressof(pageable))):
            ctypes.memset(host, 1, size)  # every host page exists before it is timed
            out[f"h2d_{kind}_gbps"] = size / timed(driver, stream, repeats, lambda h=host: driver.call(
                "cuMemcpyHtoDAsync_v2", device, ctypes.c_void_p(h), ctypes.c_size_t(size),
                stream)) / 1e9
            out[f"d2h_{kind}_gbps"] = size / timed(driver, stream, repeats, lambda h=host: driver.call(
                "cuMemcpyDtoHAsync_v2", ctypes.c_void_p(h), device, ctypes.c_size_t(size),
                stream)) / 1e9
    finally:
        driver.call("cuMemFreeHost", pinned)
        driver.call("cuMemFree_v2", device)
    return out


def prefetches(driver, stream, size, repeats):
    """Managed memory moved by prefetch, as spillway moves it. It is written on the device first
    (cuMemsetD8Async), so every page exists and holds data to move both ways."""
    managed = driver.alloc_managed(size)
    try:
        driver.fill(managed, size, stream)
        driver.sync(stream)
        d2h, h2d = [], []
        for _ in range(repeats + 1):
            for to_device, times in ((False, d2h), (True, h2d)):
                start = time.perf_counter()
                driver.prefetch(managed, size, to_device, stream)
                driver.call("cuStreamSynchronize", stream)
                times.append(time.perf_counter() - start)
        return {"h2d_prefetch_gbps": size / statistics.median(h2d[1:]) / 1e9,
                "d2h_prefetch_gbps": size / statistics.median(d2h[1:]) / 1e9}
    finally:
        driver.free(managed)


def small_managed_footprint(driver, stream, count=64, size=96 << 10):
    """What a small managed allocation takes on the device once resident: `count` allocations of
    `size` bytes (1.5 x 64 KiB), each its own cuMemAllocManaged, prefetched to device 0; free
    device memory before and after, per allocation (KiB). nvidia-uvm sizes a partial block's GPU
    chunks by its size and alignment (64 KiB and 4 KiB chunks), so this should be near 96 KiB, as
    simgpu charges it; 2048 would mean a 2 MiB chunk each. Also the median distance between
    consecutive allocations' addresses (KiB). Measured before any other managed memory has been
    on the device (nvidia-uvm may keep chunks it freed, and free memory would then not fall)."""
    free_before = driver.free_memory()
    pointers = []
    try:
        for _ in range(count):
            pointers.append(driver.alloc_managed(size))
        for pointer in pointers:
            driver.prefetch(pointer, size, True, stream)
        driver.call("cuStreamSynchronize", stream)
        free_after = driver.free_memory()
        ordered = sorted(pointers)
        strides = [b - a for a, b in zip(ordered, ordered[1:])]
        return {"small_managed_device_kib": (free_before - free_after) / count / 1024,
                "small_managed_stride_kib": statistics.median(strides) / 1024}
    finally:
        for pointer in pointers:
            driver.free(pointer)


def main(argv):
    parser = argparse.ArgumentParser(description="Host<->device bandwidth of GPU 0, through the "
                                     "CUDA driver API.")
    parser.add_argument("--size-mib", type=int, default=1024, help="bytes per copy, MiB (1024)")
    parser.add_argument("--repeats", type=int, default=10, help="copies per direction (10)")
    args = parser.parse_args(argv)
    if args.size_mib < 1 or args.repeats < 1:
        parser.error("--size-mib and --repeats must be at least 1")
    size = args.size_mib << 20
    try:
        driver = Driver()
    except OSError as error:
        print(f"gpu_bandwidth.py: no CUDA driver: {error}", file=sys.stderr)
        return 3
    figures = {}
    try:
        stream = driver.start()
        figures.update(small_managed_footprint(driver, stream))
        figures.update(copies(driver, stream, size, args.repeats))
        figures.update(prefetches(driver, stream, size, args.repeats))
    except DriverError as error:
        print(f"gpu_bandwidth.py: {error}", file=sys.stderr)
        if not figures:
            return 1
    print(f"{'what':26s} {'value':>9s}   ({args.size_mib} MiB, median of {args.repeats}, "
          f"driver {driver.version // 1000}.{driver.version % 1000 // 10})")
    for name, value in sorted(figures.items()):
        unit = "KiB" if name.endswith("_kib") else "GB/s"
        print(f"{name:26s} {value:9.2f} {unit}")
    result = {k: round(v, 3) for k, v in figures.items()}
    result["driver_version"] = driver.version
    print("result: " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
