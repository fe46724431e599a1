#!/usr/bin/env python3
"""Trains a deep residual MLP classifier on synthetic data with JAX: a Flax (linen) model when
Flax is installed, else the same model in plain JAX. Nothing spillway-specific.

    spillway run python examples/jax/train_flax.py --batch-size 8192 --depth 48 --width 4096

Prints the time of each step, then one `result:` line with a JSON object (median step time,
throughput). Exit status: 0 trained, 2 bad arguments, 3 JAX missing, 4 out of memory.
"""

import argparse
import json
import statistics
import sys
import time

EXIT_FRAMEWORK_MISSING = 3
EXIT_OUT_OF_MEMORY = 4
CLASSES = 1000


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Train a residual MLP (Flax if present, else plain JAX) on synthetic data.")
    parser.add_argument("--batch-size", type=int, default=1024, help="samples per step (1024)")
    parser.add_argument("--depth", type=int, default=24, help="residual blocks (24)")
    parser.add_argument("--width", type=int, default=2048, help="feature width (2048)")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps (20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first, incl. "
                        "compilation (3)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (0)")
    parser.add_argument("--plain-jax", action="store_true", help="plain JAX even if Flax exists")
    parser.add_argument("--quiet", action="store_true", help="print only the result line")
    args = parser.parse_args(argv)
    if min(args.batch_size, args.depth, args.width, args.steps) < 1 or args.warmup < 1:
        parser.error("--batch-size, --depth, --width, --steps and --warmup must be >= 1")
    return args


def flax_model(args):
    """(init(key, x) -> params, apply(params, x) -> logits) from a Flax linen module."""
    import flax.linen as nn

    class Block(nn.Module):
        width: int

        @nn.compact
        def __call__(self, x):
            y = nn.LayerNorm()(x)
            y = nn.Dense(4 * self.width)(y)
            y = nn.gelu(y)
            return x + nn.Dense(self.width)(y)

    class ResidualMLP(nn.Module):
        width: int
        depth: int

        @nn.compact
        def __call__(self, x):
            for _ in range(self.depth):
                x = Block(self.width)(x)
            return nn.Dense(CLASSES)(nn.LayerNorm()(x))

    module = ResidualMLP(args.width, args.depth)
    return module.init, module.apply


def plain_model(jax, jnp, args):
    """The same residual MLP with explicit parameters."""

    def dense(key, fan_in, fan_out):
        return {"w": jax.random.normal(key, (fan_in, fan_out)) * (fan_in ** -0.5),
                "b": jnp.zeros((fan_out,))}

    def norm(width):
        return {"scale": jnp.ones((width,)), "bias": jnp.zeros((width,))}

    def layer_norm(p, x):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-6) * p["scale"] + p["bias"]

    def init(key, x):
        keys = jax.random.split(key, 2 * args.depth + 1)
        blocks = [{"norm": norm(args.width), "up": dense(keys[2 * i], args.width, 4 * args.width),
                   "down": dense(keys[2 * i + 1], 4 * args.width, args.width)}
                  for i in range(args.depth)]
        return {"blocks": blocks, "norm": norm(args.width),
                "head": dense(keys[-1], args.width, CLASSES)}

    def apply(params, x):
        for p in params["blocks"]:
            y = layer_norm(p["norm"], x) @ p["up"]["w"] + p["up"]["b"]
            x = x + jax.nn.gelu(y) @ p["down"]["w"] + p["down"]["b"]
        return layer_norm(params["norm"], x) @ params["head"]["w"] + params["head"]["b"]

    return init, apply


def is_out_of_memory(error):
    text = str(error)
    return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


def main(argv):
    args = parse_args(argv)
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        print("train_flax.py: JAX is not installed (pip install 'jax[cuda12]' flax)",
              file=sys.stderr)
        return EXIT_FRAMEWORK_MISSING
    source = "plain JAX"
    init, apply = None, None
    if not args.plain_jax:
        try:
            init, apply = flax_model(args)
            source = "Flax"
        except ImportError:
            pass
    if init is None:
        init, apply = plain_model(jax, jnp, args)
    try:
        import optax
        optimizer = optax.adamw(1e-3)
        opt_name = "optax.adamw"
    except ImportError:
        optimizer, opt_name = None, "SGD"

    key = jax.random.PRNGKey(args.seed)
    data_key, label_key, init_key = jax.random.split(key, 3)
    try:
        x = jax.random.normal(data_key, (args.batch_size, args.width))
        labels = jax.random.randint(label_key, (args.batch_size,), 0, CLASSES)
        params = init(init_key, x)
        opt_state = optimizer.init(params) if optimizer else None
    except Exception as error:  # noqa: BLE001 - XlaRuntimeError's module moves between versions
        if is_out_of_memory(error):
            print(f"train_flax.py: out of memory setting up batch {args.batch_size}",
                  file=sys.stderr)
            return EXIT_OUT_OF_MEMORY
        raise

    def loss_fn(p):
        logits = apply(p, x)
        log_probs = jax.nn.log_softmax(logits)
        return -jnp.take_along_axis(log_probs, labels[:, None], axis=1).mean()

    @jax.jit
    def step(p, state):
        loss, grads = jax.value_and_grad(loss_fn)(p)
        if optimizer:
            updates, state = optimizer.update(grads, state, p)
            p = optax.apply_updates(p, updates)
        else:
            p = jax.tree_util.tree_map(lambda w, g: w - 1e-2 * g, p, grads)
        return p, state, loss

    if not args.quiet:
        count = sum(leaf.size for leaf in jax.tree_util.tree_leaves(params))
        print(f"residual MLP ({source}, {opt_name}): {args.depth} blocks, width {args.width}, "
              f"{count / 1e6:.1f}M parameters, batch {args.batch_size}, backend "
              f"{jax.default_backend()} ({jax.devices()[0].device_kind})")
    times = []
    try:
        for i in range(args.warmup + args.steps):
            start = time.perf_counter()
            params, opt_state, loss = step(params, opt_state)
            loss.block_until_ready()
            elapsed = time.perf_counter() - start
            if i >= args.warmup:
                times.append(elapsed)
            if not args.quiet:
                kind = "warmup" if i < args.warmup else "step"
                print(f"{kind} {i + 1:4d}  loss {float(loss):8.4f}  {elapsed * 1e3:9.1f} ms  "
                      f"{args.batch_size / elapsed:10.1f} samples/s", flush=True)
    except Exception as error:  # noqa: BLE001
        if is_out_of_memory(error):
            print(f"train_flax.py: out of memory at batch {args.batch_size}: "
                  f"{str(error).splitlines()[0]}", file=sys.stderr)
            return EXIT_OUT_OF_MEMORY
        raise
    median = statistics.median(times)
    result = {"example": "jax/train_flax", "model": source, "depth": args.depth,
              "width": args.width, "batch_size": args.batch_size, "steps": args.steps,
              "median_step_ms": round(median * 1e3, 3),
              "throughput": round(args.batch_size / median, 2), "unit": "samples/s"}
    print("result: " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
