#!/usr/bin/env python3
"""Trains a Keras ResNet (keras.applications, random initial weights, nothing downloaded) on
synthetic images with TensorFlow. Nothing spillway-specific.

    spillway run python examples/tensorflow/train_keras.py --batch-size 128 --depth 101

Prints the time of each step, then one `result:` line with a JSON object (median step time,
throughput). Exit status: 0 trained, 2 bad arguments, 3 TensorFlow missing, 4 out of memory.
"""

import argparse
import json
import statistics
import sys
import time

EXIT_FRAMEWORK_MISSING = 3
EXIT_OUT_OF_MEMORY = 4
MODELS = {50: "ResNet50", 101: "ResNet101", 152: "ResNet152"}


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Train a Keras ResNet (weights=None) on synthetic ImageNet-sized data.")
    parser.add_argument("--batch-size", type=int, default=64, help="images per step (64)")
    parser.add_argument("--depth", type=int, choices=sorted(MODELS), default=50,
                        help="ResNet depth (50)")
    parser.add_argument("--image-size", type=int, default=224, help="image side in pixels (224)")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps (20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first, incl. "
                        "tracing (3)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (0)")
    parser.add_argument("--quiet", action="store_true", help="print only the result line")
    args = parser.parse_args(argv)
    if args.batch_size < 1 or args.steps < 1 or args.warmup < 1 or args.image_size < 32:
        parser.error("--batch-size, --steps and --warmup must be >= 1, --image-size >= 32")
    return args


def is_out_of_memory(error):
    text = str(error)
    return "ResourceExhausted" in type(error).__name__ or "OOM" in text or \
        "out of memory" in text.lower()


def main(argv):
    args = parse_args(argv)
    try:
        import tensorflow as tf
    except ImportError:
        print("train_keras.py: TensorFlow is not installed (pip install 'tensorflow[and-cuda]')",
              file=sys.stderr)
        return EXIT_FRAMEWORK_MISSING
    keras = tf.keras
    keras.utils.set_random_seed(args.seed)
    gpus = tf.config.list_physical_devices("GPU")
    try:
        model = getattr(keras.applications, MODELS[args.depth])(
            weights=None, input_shape=(args.image_size, args.image_size, 3), classes=1000)
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1, momentum=0.9),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=False))
        images = tf.random.normal((args.batch_size, args.image_size, args.image_size, 3),
                                  seed=args.seed)
        labels = tf.random.uniform((args.batch_size,), maxval=1000, dtype=tf.int32,
                                   seed=args.seed)
    except Exception as error:  # noqa: BLE001 - TF raises its own error types
        if is_out_of_memory(error):
            print(f"train_keras.py: out of memory setting up batch {args.batch_size}",
                  file=sys.stderr)
            return EXIT_OUT_OF_MEMORY
        raise
    if not args.quiet:
        print(f"Keras {MODELS[args.depth]} ({model.count_params() / 1e6:.1f}M parameters), batch "
              f"{args.batch_size}, {args.image_size}x{args.image_size}, "
              f"{'GPU: ' + gpus[0].name if gpus else 'no GPU: CPU'}")
    times = []
    try:
        for i in range(args.warmup + args.steps):
            start = time.perf_counter()
            loss = float(model.train_on_batch(images, labels))  # returns after the step ran
            elapsed = time.perf_counter() - start
            if i >= args.warmup:
                times.append(elapsed)
            if not args.quiet:
                kind = "warmup" if i < args.warmup else "step"
                print(f"{kind} {i + 1:4d}  loss {loss:8.4f}  {elapsed * 1e3:9.1f} ms  "
                      f"{args.batch_size / elapsed:9.1f} images/s", flush=True)
    except Exception as error:  # noqa: BLE001
        if is_out_of_memory(error):
            print(f"train_keras.py: out of memory at batch {args.batch_size}: "
                  f"{str(error).splitlines()[0]}", file=sys.stderr)
            return EXIT_OUT_OF_MEMORY
        raise
    median = statistics.median(times)
    result = {"example": "tensorflow/train_keras", "depth": args.depth,
              "batch_size": args.batch_size, "steps": args.steps,
              "median_step_ms": round(median * 1e3, 3),
              "throughput": round(args.batch_size / median, 2), "unit": "images/s"}
    print("result: " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
