#!/usr/bin/env python3
"""Trains a GPT-2-style transformer built from a config (no downloaded weights) on random tokens.

A plain PyTorch training loop, nothing spillway-specific. Under spillway it trains models and
batches larger than the GPU's memory:

    spillway run python examples/pytorch/train_gpt.py --config gpt2-medium --batch-size 16

Prints the time of each step, then one `result:` line with a JSON object (median step time,
throughput in tokens/s). Exit status: 0 trained, 2 bad arguments, 3 PyTorch missing, 4 out of
memory.
"""

import argparse
import json
import math
import statistics
import sys
import time

EXIT_FRAMEWORK_MISSING = 3
EXIT_OUT_OF_MEMORY = 4

# GPT-2's published sizes: layers, heads, embedding width.
CONFIGS = {
    "gpt2": (12, 12, 768),
    "gpt2-medium": (24, 16, 1024),
    "gpt2-large": (36, 20, 1280),
    "gpt2-xl": (48, 25, 1600),
}


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Train a GPT-2-style transformer from a config on random tokens.")
    parser.add_argument("--config", choices=sorted(CONFIGS), default="gpt2",
                        help="model size preset (gpt2 = 124M parameters)")
    parser.add_argument("--layers", type=int, help="override the preset's layer count (depth)")
    parser.add_argument("--heads", type=int, help="override the preset's attention heads")
    parser.add_argument("--embd", type=int, help="override the preset's embedding width")
    parser.add_argument("--seq-len", type=int, default=1024, help="tokens per sequence (1024)")
    parser.add_argument("--vocab", type=int, default=50257, help="vocabulary size (50257)")
    parser.add_argument("--batch-size", type=int, default=8, help="sequences per step (8)")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps (20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (3)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (0)")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--amp", action="store_true", help="bfloat16 autocast")
    parser.add_argument("--memory-fraction", type=float,
                        help="limit PyTorch to this fraction of the GPU's memory (0 < F <= 1)")
    parser.add_argument("--quiet", action="store_true", help="print only the result line")
    args = parser.parse_args(argv)
    layers, heads, embd = CONFIGS[args.config]
    args.layers = args.layers or layers
    args.heads = args.heads or heads
    args.embd = args.embd or embd
    if min(args.layers, args.heads, args.embd, args.seq_len, args.vocab, args.batch_size,
           args.steps) < 1 or args.warmup < 0:
        parser.error("sizes, --batch-size and --steps must be >= 1, --warmup >= 0")
    if args.memory_fraction is not None and not 0 < args.memory_fraction <= 1:
        parser.error(f"--memory-fraction {args.memory_fraction}: expected 0 < F <= 1")
    if args.embd % args.heads:
        parser.error(f"--embd {args.embd} is not a multiple of --heads {args.heads}")
    return args


def build_model(torch, args):
    nn = torch.nn
    functional = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(args.embd)
            self.qkv = nn.Linear(args.embd, 3 * args.embd)
            self.proj = nn.Linear(args.embd, args.embd)
            self.ln2 = nn.LayerNorm(args.embd)
            self.mlp = nn.Sequential(nn.Linear(args.embd, 4 * args.embd), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * args.embd, args.embd))

        def forward(self, x):
            batch, seq, width = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(width, dim=2)
            shape = (batch, seq, args.heads, width // args.heads)
            q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
            y = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(batch, seq, width))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(args.vocab, args.embd)
            self.wpe = nn.Embedding(args.seq_len, args.embd)
            self.blocks = nn.ModuleList(Block() for _ in range(args.layers))
            self.ln_f = nn.LayerNorm(args.embd)
            self.head = nn.Linear(args.embd, args.vocab, bias=False)
            self.head.weight = self.wte.weight  # tied, as in GPT-2
            self.apply(self._init)
            for name, p in self.named_parameters():
                if name.endswith("proj.weight"):
                    nn.init.normal_(p, std=0.02 / math.sqrt(2 * args.layers))

        @staticmethod
        def _init(module):
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

        def forward(self, tokens):
            positions = torch.arange(tokens.shape[1], device=tokens.device)
            x = self.wte(tokens) + self.wpe(positions)
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    return GPT()


def device_used(torch):
    """Bytes of the current device in use (by this and any other process)."""
    free, total = torch.cuda.mem_get_info()
    return total - free


def main(argv):
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("train_gpt.py: PyTorch is not installed (pip install torch)", file=sys.stderr)
        return EXIT_FRAMEWORK_MISSING
    if args.device == "cuda" and not torch.cuda.is_available():
        print("train_gpt.py: no CUDA device visible to PyTorch (use --device cpu to run on the CPU)",
              file=sys.stderr)
        return 1
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    if args.memory_fraction is not None and device.type == "cuda":
        torch.cuda.set_per_process_memory_fraction(args.memory_fraction)
    used_at_start = device_used(torch) if device.type == "cuda" else 0
    model = build_model(torch, args).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    tokens = torch.randint(0, args.vocab, (args.batch_size, args.seq_len + 1), device=device,
                           generator=generator)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.amp):
            logits = model(inputs)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, args.vocab),
                                                     targets.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss

    tokens_per_step = args.batch_size * args.seq_len
    if not args.quiet:
        params = sum(p.numel() for p in model.parameters())
        print(f"GPT ({args.layers} layers, {args.heads} heads, width {args.embd}, "
              f"{params / 1e6:.1f}M parameters), batch {args.batch_size} x {args.seq_len} tokens, "
              f"device {device}")
    times = []
    try:
        for i in range(args.warmup + args.steps):
            start = time.perf_counter()
            loss = step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            elapsed = time.perf_counter() - start
            if i >= args.warmup:
                times.append(elapsed)
            if not args.quiet:
                kind = "warmup" if i < args.warmup else "step"
                print(f"{kind} {i + 1:4d}  loss {loss.item():8.4f}  {elapsed * 1e3:9.1f} ms  "
                      f"{tokens_per_step / elapsed:11.1f} tokens/s", flush=True)
    except RuntimeError as error:  # torch.cuda.OutOfMemoryError is a RuntimeError
        if "out of memory" in str(error).lower():
            print(f"train_gpt.py: out of memory at batch {args.batch_size}: "
                  f"{str(error).splitlines()[0]}", file=sys.stderr)
            return EXIT_OUT_OF_MEMORY
        raise
    median = statistics.median(times)
    result = {"example": "pytorch/train_gpt", "layers": args.layers, "embd": args.embd,
              "batch_size": args.batch_size, "seq_len": args.seq_len, "steps": args.steps,
              "median_step_ms": round(median * 1e3, 3),
              "throughput": round(tokens_per_step / median, 2), "unit": "tokens/s"}
    if device.type == "cuda":
        result["max_memory_allocated"] = torch.cuda.max_memory_allocated()
        # Device memory the job took after its start outside PyTorch's allocator (kernels loaded
        # lazily, libraries' own): what a ballast must leave beside the budget (the GPU check).
        result["outside_allocator_bytes"] = max(
            0, device_used(torch) - torch.cuda.memory_reserved() - used_at_start)
    print("result: " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
