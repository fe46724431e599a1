#!/usr/bin/env python3
"""Records training steps of a real PyTorch model, run on the CPU, as a spillway trace.

    python3 workloads/recorder/record.py --model resnet50 --batch 16 --steps 4 \\
        -o workloads/traces/resnet50-b16.trace.gz

Builds the model without weights (models.py), moves it to the "device", and runs --steps
training steps (a random batch copied to the device, forward, loss, backward, optimizer step,
zero_grad(set_to_none=True), loss.item()) under the op recorder (op_recorder.py). The trace
(format 1.2, gzip-compressed where the name ends in .gz) holds what a CUDA job running the same
steps would show: every storage's allocation and free, one launch per op with the byte ranges
it reads and writes, each op's time under the H100 PCIe model (op_time.py), and a synchronize at
the end of each step. docs/workloads.md ("The recorder") says more.

Needs PyTorch and torchvision (Debian's python3-torch and python3-torchvision, from
scripts/setup.sh; Debian's /usr/bin/python3 has them where another python3 on PATH does not).
Prints one line per step, then a `result:` line with a JSON object (the trace's figures).
Exit status: 0 recorded, 2 bad arguments, 3 PyTorch or torchvision missing.
"""

import argparse
import json
import os
import stat
import sys
import time

EXIT_BAD_ARGUMENTS = 2
EXIT_FRAMEWORK_MISSING = 3

SPILLWAY_VERSION = "0.1.0"
DEVICE_NAME = "recorded on CPU (H100 PCIe op-time model)"

torch = models = op_recorder = trace_file = None  # import_pytorch() loads them


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="record.py",
        description="Record training steps of a PyTorch model on the CPU as a spillway trace.")
    parser.add_argument("--model", help="the model to train (--list names them)")
    parser.add_argument("--batch", type=int, help="samples per step (default: the model's own)")
    parser.add_argument("--steps", type=int, default=4, help="training steps (default 4)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the weights and the batches (default 0)")
    parser.add_argument("-o", "--output",
                        help="the trace to write (gzip-compressed if it ends in .gz)")
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    return parser.parse_args(argv)


def usage_error(message):
    print(f"record.py: {message}", file=sys.stderr)
    sys.exit(EXIT_BAD_ARGUMENTS)


def import_pytorch():
    """Imports PyTorch and the recorder's modules, or says what to install and exits."""
    global torch, models, op_recorder, trace_file
    try:
        import torch
        import torchvision  # noqa: F401  (models.py builds its networks)
    except ImportError as error:
        print(f"record.py: {error.name or 'torch'} is missing from {sys.executable}: install "
              "Debian's python3-torch and python3-torchvision (scripts/setup.sh does), and run "
              "this with the python3 that has them (/usr/bin/python3)", file=sys.stderr)
        sys.exit(EXIT_FRAMEWORK_MISSING)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import models
    import op_recorder
    import trace_file


def check_model(args):
    """Refuses an unknown model, or a batch out of range, with one line; fills in the batch."""
    if args.model not in models.MODELS:
        usage_error(f"unknown model '{args.model}'; known: {', '.join(models.MODELS)}")
    if args.batch is None:
        args.batch = models.MODELS[args.model].default_batch


def check_args(args):
    """Refuses, with one line each, what cannot be recorded (before PyTorch is loaded)."""
    if args.model is None and not args.list:
        usage_error("--model is required (--list names the models)")
    if args.batch is not None and not 1 <= args.batch <= 4096:
        usage_error(f"--batch {args.batch}: want 1 to 4096 samples")
    if not 1 <= args.steps <= 100:
        usage_error(f"--steps {args.steps}: want 1 to 100 steps")
    if args.list:
        return
    if args.output is None:
        usage_error("-o/--output is required: the trace to write")
    output = args.output
    if os.path.isdir(output):
        usage_error(f"-o {output}: is a folder; name the trace file to write")
    if os.path.exists(output) and not stat.S_ISREG(os.stat(output).st_mode):
        usage_error(f"-o {output}: not a regular file (a device or a pipe); name a trace file")
    folder = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(folder):
        usage_error(f"-o {output}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        usage_error(f"-o {output}: cannot write in {folder}")


def command_line(args):
    return (f"workloads/recorder/record.py --model {args.model} --batch {args.batch} "
            f"--steps {args.steps} --seed {args.seed}")


def train_step(workload, model, optimizer, recorder, batch, generator):
    """One training step as a CUDA training loop runs it; its locals die when it returns."""
    with recorder.on_host():
        inputs, targets = workload.batch(batch, generator)     # the data loader's batch
    recorder.to_device(op_recorder.tensors_in((inputs, targets)))
    loss = workload.loss(model, inputs, targets)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()


def record(args):
    """Records the steps into args.output; returns the result object."""
    workload = models.MODELS[args.model]
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed + 1)
    partial = f"{args.output}.partial"
    trace = trace_file.TraceFile(partial, compress=args.output.endswith(".gz"))
    try:
        trace.header(f"{args.model} batch {args.batch}, {args.steps} training steps: "
                     f"{command_line(args)}", DEVICE_NAME, SPILLWAY_VERSION,
                     start_ns=op_recorder.CLOCK_BASE_NS)
        recorder = op_recorder.OpRecorder(trace)
        with recorder:
            started = time.monotonic()
            with recorder.on_host():
                model = workload.build()
            recorder.to_device(list(model.parameters()) + list(model.buffers()))
            optimizer = workload.optimizer(model)
            recorder.end_step(synchronize=False)
            print(f"record.py: {args.model} built and moved to the device "
                  f"({time.monotonic() - started:.1f} s)", file=sys.stderr)
            for step in range(1, args.steps + 1):
                started = time.monotonic()
                loss = train_step(workload, model, optimizer, recorder, args.batch, generator)
                recorder.end_step()
                stats = recorder.steps[-2]
                print(f"record.py: step {step}: loss {loss:.3f}, {stats.events} events, "
                      f"op time {stats.op_time_ns / 1e6:.2f} ms, "
                      f"{time.monotonic() - started:.1f} s", file=sys.stderr)
        recorder.finish()
    except BaseException:
        trace.abandon()
        os.unlink(partial)
        raise
    os.replace(partial, args.output)
    return summary(args, recorder)


def summary(args, recorder):
    steps = recorder.steps[1:]
    return {
        "model": args.model,
        "description": models.MODELS[args.model].description,
        "batch": args.batch,
        "steps": len(steps),
        "trace": args.output,
        "trace_bytes": os.path.getsize(args.output),
        "records": recorder.records_written + 1,
        "setup_events": recorder.steps[0].events,
        "events_per_step": [s.events for s in steps],
        "launches_per_step": [s.launches for s in steps],
        "op_time_ms_per_step": [round(s.op_time_ns / 1e6, 3) for s in steps],
        "peak_live_bytes": recorder.peak_live_bytes,
        "peak_live_bytes_per_step": [s.peak_live_bytes for s in steps],
        "host_tensors_read_by_device_ops": recorder.host_tensors_read,
        "command": command_line(args),
    }


def main(argv):
    args = parse_args(argv)
    check_args(args)
    import_pytorch()
    if args.list:
        for name, workload in models.MODELS.items():
            print(f"{name:16} batch {workload.default_batch:3}  {workload.description}")
        return 0
    check_model(args)
    result = record(args)
    print("result: " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
