#!/usr/bin/env python3
"""Trains a ResNet on synthetic images: a plain PyTorch training loop, nothing spillway-specific.

Run it as is, or under spillway to train with more memory than the GPU has:

    spillway run python examples/pytorch/train_resnet.py --batch-size 256 --depth 152

Uses torchvision's ResNet when torchvision is installed, else the same architecture defined below.
Prints the time of each step, then one `result:` line with a JSON object (median step time,
throughput). Exit status: 0 trained, 2 bad arguments, 3 PyTorch missing, 4 out of memory.
"""

import argparse
import json
import statistics
import sys
import time

EXIT_FRAMEWORK_MISSING = 3
EXIT_OUT_OF_MEMORY = 4

# Bottleneck blocks per stage for the standard depths; other depths (3n + 2) spread evenly.
STANDARD_DEPTHS = {50: [3, 4, 6, 3], 101: [3, 4, 23, 3], 152: [3, 8, 36, 3], 200: [3, 24, 36, 3]}


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Train a ResNet (bottleneck blocks) on synthetic ImageNet-sized data.")
    parser.add_argument("--batch-size", type=int, default=64, help="images per step (64)")
    parser.add_argument("--depth", type=int, default=50,
                        help="layers: 50, 101, 152, 200, or any 3n+2 >= 14 (50)")
    parser.add_argument("--image-size", type=int, default=224, help="image side in pixels (224)")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps (20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (3)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (0)")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--amp", action="store_true", help="bfloat16 autocast")
    parser.add_argument("--memory-fraction", type=float,
                        help="limit PyTorch to this fraction of the GPU's memory (0 < F <= 1)")
    parser.add_argument("--quiet", action="store_true", help="print only the result line")
    args = parser.parse_args(argv)
    if args.batch_size < 1 or args.steps < 1 or args.warmup < 0 or args.image_size < 32:
        parser.error("--batch-size and --steps must be >= 1, --warmup >= 0, --image-size >= 32")
    if args.memory_fraction is not None and not 0 < args.memory_fraction <= 1:
        parser.error(f"--memory-fraction {args.memory_fraction}: expected 0 < F <= 1")
    if args.depth not in STANDARD_DEPTHS and (args.depth < 14 or (args.depth - 2) % 3):
        parser.error(f"--depth {args.depth}: expected 50, 101, 152, 200 or 3n+2 >= 14")
    return args


def stage_blocks(depth):
    if depth in STANDARD_DEPTHS:
        return STANDARD_DEPTHS[depth]
    blocks = (depth - 2) // 3
    base, extra = divmod(blocks, 4)
    return [base + (1 if i < extra else 0) for i in range(4)]


def build_model(torch, depth, num_classes=1000):
    layers = stage_blocks(depth)
    try:
        from torchvision.models.resnet import Bottleneck, ResNet
        return ResNet(Bottleneck, layers, num_classes=num_classes), "torchvision"
    except ImportError:
        return InlineResNet(torch, layers, num_classes), "inline"


def InlineResNet(torch, layers, num_classes):
    """torchvision's ResNet with bottleneck blocks, for machines without torchvision."""
    nn = torch.nn

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, inplanes, planes, stride):
            super().__init__()
            width = planes
            self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, planes * 4, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(planes * 4)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or inplanes != planes * 4:
                self.downsample = nn.Sequential(
                    nn.Conv2d(inplanes, planes * 4, 1, stride=stride, bias=False),
                    nn.BatchNorm2d(planes * 4))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            return self.relu(out + identity)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64),
                nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1))
            blocks, inplanes = [], 64
            for stage, count in enumerate(layers):
                planes = 64 * 2**stage
                for i in range(count):
                    stride = 2 if (stage > 0 and i == 0) else 1
                    blocks.append(Bottleneck(inplanes, planes, stride))
                    inplanes = planes * 4
            self.blocks = nn.Sequential(*blocks)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(inplanes, num_classes)

        def forward(self, x):
            return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))

    return ResNet()


def is_out_of_memory(error):
    return "out of memory" in str(error).lower()


def device_used(torch):
    """Bytes of the current device in use (by this and any other process)."""
    free, total = torch.cuda.mem_get_info()
    return total - free


def main(argv):
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("train_resnet.py: PyTorch is not installed (pip install torch torchvision)",
              file=sys.stderr)
        return EXIT_FRAMEWORK_MISSING
    if args.device == "cuda" and not torch.cuda.is_available():
        print("train_resnet.py: no CUDA device visible to PyTorch (use --device cpu to run on the "
              "CPU)", file=sys.stderr)
        return 1
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    if args.memory_fraction is not None and device.type == "cuda":
        torch.cuda.set_per_process_memory_fraction(args.memory_fraction)
    used_at_start = device_used(torch) if device.type == "cuda" else 0
    model, source = build_model(torch, args.depth)
    model = model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    generator = torch.Generator(device=device).manual_seed(args.seed)
    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size, device=device,
                         generator=generator)
    labels = torch.randint(0, 1000, (args.batch_size,), device=device, generator=generator)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.amp):
            loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss

    if not args.quiet:
        params = sum(p.numel() for p in model.parameters())
        print(f"ResNet-{args.depth} ({source}, {params / 1e6:.1f}M parameters), batch "
              f"{args.batch_size}, {args.image_size}x{args.image_size}, device {device}")
    times = []
    try:
        for i in range(args.warmup + args.steps):
            start = time.perf_counter()
            loss = step()
            sync()
            elapsed = time.perf_counter() - start
            if i >= args.warmup:
                times.append(elapsed)
            if not args.quiet:
                kind = "warmup" if i < args.warmup else "step"
                print(f"{kind} {i + 1:4d}  loss {loss.item():8.4f}  {elapsed * 1e3:9.1f} ms  "
                      f"{args.batch_size / elapsed:9.1f} images/s", flush=True)
    except RuntimeError as error:  # torch.cuda.OutOfMemoryError is a RuntimeError
        if is_out_of_memory(error):
            print(f"train_resnet.py: out of memory at batch {args.batch_size}: "
                  f"{str(error).splitlines()[0]}", file=sys.stderr)
            return EXIT_OUT_OF_MEMORY
        raise
    median = statistics.median(times)
    result = {"example": "pytorch/train_resnet", "depth": args.depth,
              "batch_size": args.batch_size, "steps": args.steps,
              "median_step_ms": round(median * 1e3, 3),
              "throughput": round(args.batch_size / median, 2), "unit": "images/s"}
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
