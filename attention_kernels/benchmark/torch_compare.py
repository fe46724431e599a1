#!/usr/bin/env python3
"""Side by side in one run: TFLOP/s (forward, backward) and peak memory of spillway's SDPA kernels
and PyTorch's scaled_dot_product_attention backends (flash, memory-efficient, cuDNN) and a naive
attention (matmul + softmax + matmul), over attention_benchmark's grid: seq 512..16k, head dims 64
and 128, causal and not, bf16 and fp16, batch * seq = --tokens, heads * dim = 2048.

spillway's kernels come through the PyTorch extension of examples/attention/torch_attention.py
(compiled at run time with nvcc on first use; cached afterwards). A backend that does not support
a configuration, or runs out of memory, says so in its cell. Then spillway's outputs and gradients
against flash's (worst relative error), and the issue's goals: forward at least PyTorch's flash
backend at dim 128, bf16, seq >= 4k; backward at least 80% of it.

Exit status: 0 measured, 1 a backend failed unexpectedly, 2 no CUDA device, 3 PyTorch missing.
See docs/attention-benchmark.md.
"""
import argparse
import csv
import os
import subprocess
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PROG = "torch_compare.py"
MODEL_DIM = 2048  # heads * head_dim, as in attention_benchmark (benchmark_plan.h: kModelDim)
BACKENDS = ["spillway", "flash", "efficient", "cudnn", "naive"]
# Exit statuses.
EXIT_FAILED, EXIT_NO_GPU, EXIT_NO_TORCH = 1, 2, 3


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="bf16 only, seq 1k and 4k")
    p.add_argument("--tokens", type=int, default=16384,
                   help="batch * seq of every configuration (default 16384)")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs before timing (default 3)")
    p.add_argument("--iters", type=int, default=10,
                   help="timed runs; the tables show their median (default 10)")
    p.add_argument("--backends", default=",".join(BACKENDS),
                   help="comma-separated subset of: " + ", ".join(BACKENDS))
    p.add_argument("--csv", metavar="PATH", help="also write one row per configuration and backend")
    p.add_argument("--arch", help="TORCH_CUDA_ARCH_LIST for the extension (default: this GPU's)")
    p.add_argument("--verbose", action="store_true", help="show the extension's compiler output")
    args = p.parse_args(argv)
    args.backends = [b for b in args.backends.split(",") if b]
    unknown = [b for b in args.backends if b not in BACKENDS]
    if unknown or not args.backends:
        p.error(f"--backends: unknown backend {unknown[0]!r}" if unknown else "--backends: empty")
    if args.tokens < 512 or args.warmup < 0 or args.iters < 1:
        p.error("--tokens must be >= 512, --warmup >= 0, --iters >= 1")
    return args


def grid(quick, tokens):
    """The same grid as attention_benchmark (benchmark_plan.cc: SdpaGrid), in the same order."""
    dtypes = ["bf16"] if quick else ["bf16", "fp16"]
    seqlens = [1024, 4096] if quick else [512, 1024, 2048, 4096, 8192, 16384]
    return [dict(dtype=dt, dim=dim, causal=causal, batch=max(1, tokens // seq),
                 heads=MODEL_DIM // dim, seq=seq)
            for dt in dtypes for dim in (64, 128) for causal in (False, True) for seq in seqlens]


def forward_flops(c):
    """FlashAttention's count: 4 * b * h * s * s * d, halved when causal; backward 2.5x."""
    flops = 4.0 * c["batch"] * c["heads"] * c["seq"] * c["seq"] * c["dim"]
    return flops / 2 if c["causal"] else flops


def load_spillway(arch, verbose):
    """The extension, through torch_attention.py's loader (shared, not copied)."""
    sys.path.insert(0, os.path.join(ROOT, "examples", "attention"))
    import torch_attention  # pylint: disable=import-outside-toplevel
    return torch_attention.load_extension(arch, verbose)


class Runner:
    """Builds, per backend, a forward closure and a backward closure on shared BSHD inputs."""

    def __init__(self, torch, ext, sdpa):
        self.torch, self.ext, self.sdpa = torch, ext, sdpa
        import torch.nn.functional as F  # pylint: disable=import-outside-toplevel
        self.F = F

    def closures(self, backend, c, q, k, v, d_o):
        torch, F = self.torch, self.F
        if backend == "spillway":
            if self.ext is None:
                raise Unsupported("extension not built")
            state = {}

            def fwd():
                state["o"], state["lse"] = self.ext.forward(q, k, v, c["causal"], 0.0)
                return state["o"]

            def bwd():
                return self.ext.backward(d_o, q, k, v, state["o"], state["lse"], c["causal"], 0.0)
            return fwd, bwd
        # PyTorch takes [batch, heads, seq, dim]: transposed views of the same BSHD storage.
        qt, kt, vt, dot = (t.transpose(1, 2) for t in (q, k, v, d_o))
        if backend == "naive":
            scale = c["dim"] ** -0.5

            def attend():
                s = torch.matmul(qt, kt.transpose(-2, -1)) * scale
                if c["causal"]:
                    n = c["seq"]
                    mask = torch.ones(n, n, dtype=torch.bool, device=q.device).triu_(1)
                    s = s.masked_fill(mask, float("-inf"))
                p = torch.softmax(s.float(), dim=-1).to(q.dtype)
                return torch.matmul(p, vt)
        else:
            if self.sdpa is None:
                raise Unsupported("torch.nn.attention missing")
            kind = self.sdpa["backends"].get(backend)
            if kind is None:
                raise Unsupported(f"not in torch {torch.__version__}")

            def attend():
                with self.sdpa["kernel"](kind):
                    return F.scaled_dot_product_attention(qt, kt, vt, is_causal=c["causal"])
        state = {}

        def fwd():
            state["o"] = attend()
            return state["o"]

        def bwd():
            return torch.autograd.grad(state["o"], (q, k, v), dot, retain_graph=True)
        return fwd, bwd


class Unsupported(Exception):
    """A backend cannot run a configuration; the message goes into the cell."""


def median_ms(torch, fn, warmup, iters):
    for _ in range(warmup):
        fn()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(iters)]
    for start, stop in events:
        start.record()
        fn()
        stop.record()
    torch.cuda.synchronize()
    ms = sorted(start.elapsed_time(stop) for start, stop in events)
    mid = len(ms) // 2
    return ms[mid] if len(ms) % 2 else (ms[mid - 1] + ms[mid]) / 2


def measure(torch, runner, backend, c, inputs, args):
    """One cell: dict(fwd_ms, bwd_ms, peak) or dict(note=why not)."""
    q, k, v, d_o = inputs
    try:
        fwd, bwd = runner.closures(backend, c, q, k, v, d_o)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        fwd()
        bwd()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        fwd_ms = median_ms(torch, fwd, args.warmup, args.iters)
        fwd()  # the graph the backward runs on
        bwd_ms = median_ms(torch, bwd, args.warmup, args.iters)
        return dict(fwd_ms=fwd_ms, bwd_ms=bwd_ms, peak=peak)
    except Unsupported as e:
        return dict(note=f"n/a: {e}")
    except torch.cuda.OutOfMemoryError:
        return dict(note="OOM")
    except RuntimeError as e:
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "No available kernel" in text or "not supported" in text.lower():
            return dict(note="unsupported")
        # Only spillway's own failures fail the run; PyTorch's backends vary by version.
        return dict(note="error: " + text[:80], failed=backend == "spillway")
    finally:
        torch.cuda.empty_cache()


def agreement(torch, runner, c, inputs, row):
    """Worst relative error ||spillway - flash|| / ||flash|| over O, dQ, dK, dV (a sanity check of
    the timed kernels, not the correctness test), or why it is not known. Runs after the timed
    cells so that the kept outputs do not count in any backend's peak memory."""
    if "fwd_ms" not in row.get("spillway", {}) or "fwd_ms" not in row.get("flash", {}):
        return "n/a"
    q, k, v, d_o = inputs
    outs = {}
    try:
        for backend in ("spillway", "flash"):
            fwd, bwd = runner.closures(backend, c, q, k, v, d_o)
            o = fwd()
            if backend == "flash":
                o = o.transpose(1, 2)  # back to BSHD
            outs[backend] = [o.detach()] + [g.detach() for g in bwd()]
        worst = 0.0
        for a, b in zip(outs["spillway"], outs["flash"]):
            ref = b.float()
            worst = max(worst, ((a.float() - ref).norm() / ref.norm().clamp_min(1e-30)).item())
        return f"{worst:.1e}"
    except RuntimeError as e:  # incl. out of memory
        return "n/a: " + (str(e).strip().splitlines() or [type(e).__name__])[0][:60]
    finally:
        outs.clear()
        torch.cuda.empty_cache()


def sdpa_api(torch):
    try:
        # pylint: disable-next=import-outside-toplevel
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return None
    names = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
             "cudnn": "CUDNN_ATTENTION"}
    return dict(kernel=sdpa_kernel,
                backends={b: getattr(SDPBackend, n) for b, n in names.items()
                          if hasattr(SDPBackend, n)})


def print_table(title, configs, results, backends, cell):
    print(f"\n{title}\n")
    print("| dtype | dim | causal | batch | heads | seq | " + " | ".join(backends) + " |")
    print("|---" * (6 + len(backends)) + "|")
    for i, c in enumerate(configs):
        cells = []
        for b in backends:
            r = results[i][b]
            cells.append(r["note"] if "note" in r else cell(c, r))
        print(f"| {c['dtype']} | {c['dim']} | {'yes' if c['causal'] else 'no'} | {c['batch']} | "
              f"{c['heads']} | {c['seq']} | " + " | ".join(cells) + " |")


def goal_summary(configs, results):
    """The issue's goals at dim 128, bf16, seq >= 4k: spillway/flash forward >= 1, backward >= 0.8.
    Equal FLOPs on both sides, so the ratio of times is the ratio of TFLOP/s."""
    fwd, bwd, wrong = [], [], 0
    for i, c in enumerate(configs):
        if c["dtype"] != "bf16" or c["dim"] != 128 or c["seq"] < 4096:
            continue
        s, f = results[i].get("spillway", {}), results[i].get("flash", {})
        if "fwd_ms" in s and "fwd_ms" in f:
            fwd.append(f["fwd_ms"] / s["fwd_ms"])
            bwd.append(f["bwd_ms"] / s["bwd_ms"])
            try:
                wrong += float(results[i].get("agreement", "n/a")) >= 1e-2
            except ValueError:
                pass
    if not fwd:
        return ("Goals (bf16, dim 128, seq >= 4k): not measured (needs both spillway and flash "
                "cells at those configurations)")

    def verdict(values, goal):
        met = "met" if min(values) >= goal else "NOT met"
        return f"min {min(values):.2f}, max {max(values):.2f} ({met}: goal >= {goal})"
    caveat = (f"; but spillway's outputs differ from flash's by >= 1e-2 at {wrong} of them, so "
              "these times are not of a correct kernel" if wrong else "")
    return (f"Goals (bf16, dim 128, seq >= 4k, {len(fwd)} configurations): spillway/flash TFLOP/s "
            f"forward {verdict(fwd, 1.0)}; backward {verdict(bwd, 0.8)}{caveat}")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import torch  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        print(f"{PROG}: PyTorch is not installed ({e}); nothing measured", file=sys.stderr)
        return EXIT_NO_TORCH
    if not torch.cuda.is_available():
        print(f"{PROG}: no CUDA device visible to PyTorch {torch.__version__}; nothing measured",
              file=sys.stderr)
        return EXIT_NO_GPU
    props = torch.cuda.get_device_properties(0)
    ext, ext_note = None, ""
    if "spillway" in args.backends:
        arch = args.arch or "{}.{}".format(*torch.cuda.get_device_capability(0))
        try:
            ext = load_spillway(arch, args.verbose)
        except Exception as e:  # pylint: disable=broad-except  (nvcc missing, compile error)
            ext_note = str(e).strip().splitlines()[-1][:200] if str(e).strip() else type(e).__name__
            print(f"{PROG}: spillway's extension did not build: {ext_note}", file=sys.stderr)
    runner = Runner(torch, ext, sdpa_api(torch))
    print("# torch_compare\n")
    print(f"Device: {props.name} ({props.total_memory / 2**30:.1f} GiB), "
          f"PyTorch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"cuDNN {torch.backends.cudnn.version()}, driver {driver_version()}.")
    print(f"Median of {args.iters} timed runs after {args.warmup} warm-up runs (CUDA events); "
          f"batch x seq = {args.tokens} tokens, heads x dim = {MODEL_DIM}; BSHD inputs (PyTorch "
          "gets transposed views); FLOPs as FlashAttention counts them (causal halved, backward "
          "2.5x forward); peak = torch.cuda.max_memory_allocated over one forward + backward, "
          "inputs (Q, K, V, dO) included." + (f" spillway: n/a ({ext_note})" if ext_note else ""))
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    configs = grid(args.quick, args.tokens)
    results, failed = [], bool(ext_note)  # spillway asked for but not built: a failure
    # PyTorch warns for every backend that cannot take a configuration; the cell says so instead.
    warnings.simplefilter("ignore", UserWarning)
    for c in configs:
        shape = (c["batch"], c["seq"], c["heads"], c["dim"])
        gen = torch.Generator(device="cuda").manual_seed(0)
        inputs = [torch.randn(shape, device="cuda", dtype=dtypes[c["dtype"]], generator=gen)
                  for _ in range(4)]
        for t in inputs[:3]:
            t.requires_grad_()
        row = {}
        for b in args.backends:
            row[b] = measure(torch, runner, b, c, inputs, args)
            failed |= row[b].get("failed", False)
        row["agreement"] = agreement(torch, runner, c, inputs, row)
        results.append(row)
        del inputs
        torch.cuda.empty_cache()

    def tflops(factor, key):
        return lambda c, r: f"{factor * forward_flops(c) / (r[key] * 1e-3) / 1e12:.1f}"
    print_table("Forward TFLOP/s", configs, results, args.backends, tflops(1.0, "fwd_ms"))
    print_table("Backward TFLOP/s", configs, results, args.backends, tflops(2.5, "bwd_ms"))
    print_table("Peak memory (MiB, inputs included)", configs, results, args.backends,
                lambda c, r: f"{r['peak'] / 2**20:.0f}")
    print("\nspillway against flash, worst relative error over O, dQ, dK, dV (the correctness bar"
          " of attention_gpu_test: bf16 < 1e-2, fp16 < 5e-3; flash is not exact either)\n")
    print("| dtype | dim | causal | batch | heads | seq | error |")
    print("|---" * 7 + "|")
    for c, row in zip(configs, results):
        print(f"| {c['dtype']} | {c['dim']} | {'yes' if c['causal'] else 'no'} | {c['batch']} | "
              f"{c['heads']} | {c['seq']} | {row['agreement']} |")
    print("\n" + goal_summary(configs, results))
    if args.csv:
        write_csv(args.csv, configs, results, args.backends)
    return EXIT_FAILED if failed else 0


def driver_version():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=False)
        return out.stdout.strip().splitlines()[0] if out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def write_csv(path, configs, results, backends):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["backend", "dtype", "head_dim", "causal", "batch", "heads", "seqlen", "fwd_ms",
                    "fwd_tflops", "bwd_ms", "bwd_tflops", "peak_bytes", "note"])
        for c, row in zip(configs, results):
            for b in backends:
                r = row[b]
                fl = forward_flops(c)
                w.writerow([b, c["dtype"], c["dim"], int(c["causal"]), c["batch"], c["heads"],
                            c["seq"], r.get("fwd_ms", ""),
                            fl / (r["fwd_ms"] * 1e-3) / 1e12 if "fwd_ms" in r else "",
                            r.get("bwd_ms", ""),
                            2.5 * fl / (r["bwd_ms"] * 1e-3) / 1e12 if "bwd_ms" in r else "",
                            r.get("peak", ""), r.get("note", "")])


if __name__ == "__main__":
    sys.exit(main())
