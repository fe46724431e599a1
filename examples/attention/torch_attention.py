#!/usr/bin/env python3
"""Loads spillway's attention kernels into PyTorch at run time and checks them against
torch.nn.functional.scaled_dot_product_attention (forward and backward, BSHD layout); with
--additive, checks fused additive attention (with source lengths) against plain PyTorch instead,
and that source lengths outside [0, source_len] are refused before any launch.

The extension is compiled on first use by torch.utils.cpp_extension.load from the sources in
attention_kernels/ (a few minutes; cached afterwards). Needs a CUDA GPU, PyTorch, nvcc, ninja and
the Python headers; what is missing is said first, in one line (exit 3).
"""
import argparse
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=2, help="GQA: heads must be a multiple")
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--dim", type=int, default=128, choices=[64, 128])
    p.add_argument("--dtype", default="bfloat16", choices=["float16", "bfloat16"])
    p.add_argument("--causal", action="store_true")
    p.add_argument("--arch", default="8.0;9.0", help="TORCH_CUDA_ARCH_LIST for the build")
    p.add_argument("--verbose", action="store_true", help="show the compiler's output")
    p.add_argument("--additive", action="store_true",
                   help="check additive attention instead of SDPA")
    return p.parse_args()


def missing_build_tools():
    """What torch.utils.cpp_extension needs to build the extension and this machine lacks, each
    with where to get it (empty: nothing missing)."""
    import sysconfig
    from torch.utils import cpp_extension
    missing = []
    if not cpp_extension.is_ninja_available():
        missing.append("ninja (pip install ninja, or the ninja-build package)")
    include = sysconfig.get_paths().get("include") or ""
    if not os.path.exists(os.path.join(include, "Python.h")):
        missing.append(f"the Python headers (no Python.h in {include}: the python3-dev package)")
    cuda_home = cpp_extension.CUDA_HOME
    if cuda_home is None or not os.path.exists(os.path.join(cuda_home, "bin", "nvcc")):
        missing.append("nvcc (a CUDA toolkit; set CUDA_HOME to it)")
    return missing


def load_extension(arch, verbose):
    missing = missing_build_tools()
    if missing:
        raise RuntimeError("the attention extension cannot be built here: it needs "
                           + "; ".join(missing))
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", arch)
    from torch.utils.cpp_extension import load
    src = os.path.join(ROOT, "attention_kernels", "src")
    return load(
        name="spillway_attention_torch",
        sources=[os.path.join(os.path.dirname(__file__), "torch_binding.cpp"),
                 os.path.join(src, "api.cc"), os.path.join(src, "validate.cc"),
                 os.path.join(src, "sdpa_forward.cu"), os.path.join(src, "sdpa_backward.cu"),
                 os.path.join(src, "additive.cu"), os.path.join(src, "varlen_check.cu")],
        extra_include_paths=[ROOT, os.path.join(ROOT, "attention_kernels", "include")],
        extra_cflags=["-O2", "-std=c++17"],
        extra_cuda_cflags=["-O3", "-std=c++17", "--expt-relaxed-constexpr"],
        verbose=verbose)


def check_additive(ext, dtype, batch=3, target=37, source=45, units=64, value_dim=32):
    """Fused additive attention vs. plain PyTorch in fp32 (masked softmax over each sequence's
    sources); then every kind of bad source_lengths must raise, naming the entry. 0 if all pass."""
    import torch
    qp = (torch.randn(batch, target, units, device="cuda") * 0.5).to(dtype)
    kp = (torch.randn(batch, source, units, device="cuda") * 0.5).to(dtype)
    values = torch.randn(batch, source, value_dim, device="cuda").to(dtype)
    v = torch.randn(units, device="cuda") / units ** 0.5
    lengths = torch.tensor([source, 20, 0], dtype=torch.int32, device="cuda")
    context, _ = ext.additive_forward(qp, kp, values, v, lengths)
    e = torch.einsum("u,btsu->bts", v, torch.tanh(qp.float()[:, :, None] + kp.float()[:, None]))
    mask = torch.arange(source, device="cuda")[None, None, :] >= lengths.long()[:, None, None]
    p = torch.softmax(e.masked_fill(mask, float("-inf")), dim=-1).nan_to_num(0.0)
    ref = torch.einsum("bts,bsd->btd", p, values.float())
    err = ((context.float() - ref).norm() / ref.norm()).item()
    bar = 1e-2 if dtype == torch.bfloat16 else 5e-3
    print(f"additive context: relative error {err:.2e}")
    failures = 0 if err < bar else 1
    for bad, culprit in (([source, source + 1, 3], "source_lengths[1] is"),
                         ([-1, 2, 3], "source_lengths[0] is -1"),
                         ([1, 2], "source_lengths must be [batch]")):
        try:
            ext.additive_forward(qp, kp, values, v, torch.tensor(bad, dtype=torch.int32))
            print(f"FAIL: source_lengths {bad} was accepted")
            failures += 1
        except RuntimeError as error:
            if culprit not in str(error):
                print(f"FAIL: source_lengths {bad}: {error}")
                failures += 1
    print("PASS" if failures == 0 else "FAIL")
    return 0 if failures == 0 else 1


def main():
    args = parse_args()
    try:
        import torch
    except ImportError as error:
        print(f"torch_attention.py: PyTorch is not installed ({error})", file=sys.stderr)
        return 3
    import torch.nn.functional as F
    missing = missing_build_tools()
    if missing:
        print("torch_attention.py: the attention extension cannot be built here: it needs "
              + "; ".join(missing), file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("torch_attention.py: no CUDA device visible to PyTorch", file=sys.stderr)
        return 1
    ext = load_extension(args.arch, args.verbose)
    if args.additive:
        return check_additive(ext, getattr(torch, args.dtype))

    class SpillwayAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal):
            o, lse = ext.forward(q, k, v, causal, 0.0)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.causal = causal
            return o

        @staticmethod
        def backward(ctx, d_o):
            q, k, v, o, lse = ctx.saved_tensors
            dq, dk, dv = ext.backward(d_o, q, k, v, o, lse, ctx.causal, 0.0)
            return dq, dk, dv, None

    dtype = getattr(torch, args.dtype)
    shape_q = (args.batch, args.seq, args.heads, args.dim)
    shape_kv = (args.batch, args.seq, args.kv_heads, args.dim)
    q = torch.randn(shape_q, device="cuda", dtype=dtype, requires_grad=True)
    k = torch.randn(shape_kv, device="cuda", dtype=dtype, requires_grad=True)
    v = torch.randn(shape_kv, device="cuda", dtype=dtype, requires_grad=True)
    d_o = torch.randn(shape_q, device="cuda", dtype=dtype)

    out = SpillwayAttention.apply(q, k, v, args.causal)
    grads = torch.autograd.grad(out, (q, k, v), d_o)

    # Reference in fp32 through PyTorch (BHSD, KV heads repeated for GQA).
    group = args.heads // args.kv_heads
    qr, kr, vr = (t.detach().float().transpose(1, 2).requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(qr, kr.repeat_interleave(group, 1),
                                         vr.repeat_interleave(group, 1), is_causal=args.causal)
    ref_grads = torch.autograd.grad(ref, (qr, kr, vr), d_o.float().transpose(1, 2))
    ref = ref.transpose(1, 2)
    ref_grads = [g.transpose(1, 2) for g in ref_grads]
    # PyTorch's is_causal is top-left aligned: the same as bottom-right here (square shapes).

    def rel(a, b):
        return ((a.float() - b).norm() / b.norm()).item()

    worst = 0.0
    for name, a, b in [("o", out, ref)] + list(zip(("dq", "dk", "dv"), grads, ref_grads)):
        err = rel(a, b)
        worst = max(worst, err)
        print(f"{name}: relative error {err:.2e}")
    bar = 1e-2 if dtype == torch.bfloat16 else 5e-3
    print("PASS" if worst < bar else "FAIL")
    return 0 if worst < bar else 1


if __name__ == "__main__":
    sys.exit(main())
