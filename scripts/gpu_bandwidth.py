#!/usr/bin/env python3
"""Measures host<->device bandwidth on this machine's GPU, for scripts/gpu_check.sh: pinned
copies (PyTorch, else CuPy) and, with CuPy, managed-memory prefetch (what spillway's moves are),
and what a small managed allocation takes on the device once resident.

Prints a table, then one `result:` line with a JSON object of GB/s figures (10^9 bytes/s; the
`_kib` figures are KiB).
Exit status: 0 measured, 1 no GPU, 3 neither PyTorch nor CuPy installed.
"""

import argparse
import json
import statistics
import sys
import time


def parse_args(argv):
    parser = argparse.ArgumentParser(description="Host<->device bandwidth of GPU 0.")
    parser.add_argument("--size-mib", type=int, default=1024, help="bytes per copy, MiB (1024)")
    parser.add_argument("--repeats", type=int, default=10, help="copies per direction (10)")
    return parser.parse_args(argv)


def torch_pinned(size, repeats):
    import torch
    if not torch.cuda.is_available():
        return None
    host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    device = torch.empty(size, dtype=torch.uint8, device="cuda")
    out = {}
    for name, dst, src in (("h2d_pinned_gbps", device, host), ("d2h_pinned_gbps", host, device)):
        times = []
        for _ in range(repeats + 1):
            torch.cuda.synchronize()
            start = time.perf_counter()
            dst.copy_(src, non_blocking=True)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        out[name] = size / statistics.median(times[1:]) / 1e9
    return out


def cupy_figures(size, repeats, pinned):
    import cupy
    runtime = cupy.cuda.runtime
    if runtime.getDeviceCount() < 1:
        return None
    out = {}
    stream = cupy.cuda.Stream(non_blocking=True)
    if pinned:
        host = cupy.cuda.alloc_pinned_memory(size)
        device = cupy.cuda.alloc(size)
        for name, kind in (("h2d_pinned_gbps", runtime.memcpyHostToDevice),
                           ("d2h_pinned_gbps", runtime.memcpyDeviceToHost)):
            times = []
            for _ in range(repeats + 1):
                start = time.perf_counter()
                if kind == runtime.memcpyHostToDevice:
                    runtime.memcpyAsync(device.ptr, host.ptr, size, kind, stream.ptr)
                else:
                    runtime.memcpyAsync(host.ptr, device.ptr, size, kind, stream.ptr)
                stream.synchronize()
                times.append(time.perf_counter() - start)
            out[name] = size / statistics.median(times[1:]) / 1e9
    # First, before any managed memory has been on the device (nvidia-uvm may keep chunks it
    # freed, and free memory would then not fall).
    try:
        out.update(small_managed_footprint(runtime, stream))
    except Exception as error:  # noqa: BLE001 - the bandwidth figures matter more
        print(f"gpu_bandwidth.py: small managed allocations not measured: {error}",
              file=sys.stderr)
    # Managed memory moved by prefetch, as spillway moves it (the data is touched on the device
    # first so that every page exists).
    managed = cupy.cuda.malloc_managed(size)
    array = cupy.ndarray((size,), dtype=cupy.uint8, memptr=managed)
    array.fill(1)
    cupy.cuda.Device().synchronize()
    cpu = getattr(runtime, "cudaCpuDeviceId", -1)
    h2d, d2h = [], []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        runtime.memPrefetchAsync(managed.ptr, size, cpu, stream.ptr)
        stream.synchronize()
        d2h.append(time.perf_counter() - start)
        start = time.perf_counter()
        runtime.memPrefetchAsync(managed.ptr, size, 0, stream.ptr)
        stream.synchronize()
        h2d.append(time.perf_counter() - start)
    out["h2d_prefetch_gbps"] = size / statistics.median(h2d[1:]) / 1e9
    out["d2h_prefetch_gbps"] = size / statistics.median(d2h[1:]) / 1e9
    return out


def small_managed_footprint(runtime, stream, count=64, size=96 << 10):
    """What a small managed allocation takes on the device once resident: `count` allocations of
    `size` bytes (1.5 x 64 KiB), each its own cudaMallocManaged, prefetched to device 0; free
    device memory before and after, per allocation (KiB). nvidia-uvm sizes a small block's GPU
    chunks by its size and alignment (64 KiB / 4 KiB pieces of 2 MiB root chunks), so this
    should be near 96-128 KiB; 2048 would mean a 2 MiB chunk each (simgpu's model). Also the
    median distance between consecutive allocations' addresses (KiB)."""
    runtime.deviceSynchronize()
    free_before, _ = runtime.memGetInfo()
    pointers = [runtime.mallocManaged(size, 1) for _ in range(count)]  # cudaMemAttachGlobal
    try:
        for pointer in pointers:
            runtime.memPrefetchAsync(pointer, size, 0, stream.ptr)
        stream.synchronize()
        free_after, _ = runtime.memGetInfo()
        ordered = sorted(pointers)
        strides = [b - a for a, b in zip(ordered, ordered[1:])]
        return {
            "small_managed_device_kib": (free_before - free_after) / count / 1024,
            "small_managed_stride_kib": statistics.median(strides) / 1024,
        }
    finally:
        for pointer in pointers:
            runtime.free(pointer)


def main(argv):
    args = parse_args(argv)
    size = args.size_mib << 20
    figures, sources = {}, []
    try:
        got = torch_pinned(size, args.repeats)
        if got is None:
            print("gpu_bandwidth.py: PyTorch sees no GPU", file=sys.stderr)
            return 1
        figures.update(got)
        sources.append("torch")
    except ImportError:
        pass
    try:
        got = cupy_figures(size, args.repeats, pinned="h2d_pinned_gbps" not in figures)
        if got:
            figures.update(got)
            sources.append("cupy")
    except ImportError:
        pass
    except Exception as error:  # noqa: BLE001 - report and keep what was measured
        print(f"gpu_bandwidth.py: CuPy measurement failed: {error}", file=sys.stderr)
    if not sources:
        print("gpu_bandwidth.py: neither PyTorch nor CuPy is installed", file=sys.stderr)
        return 3
    print(f"{'what':24s} {'GB/s':>8s}   ({args.size_mib} MiB, median of {args.repeats}, "
          f"{'+'.join(sources)})")
    for name, value in sorted(figures.items()):
        unit = "KiB" if name.endswith("_kib") else ""
        print(f"{name:24s} {value:8.2f} {unit}".rstrip())
    print("result: " + json.dumps({k: round(v, 3) for k, v in figures.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
