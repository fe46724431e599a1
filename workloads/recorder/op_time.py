"""The op-time model: how long one PyTorch op would take on an H100 PCIe.

An op's time is the larger of its arithmetic time and its memory time, plus a fixed launch time:

    time = max(flops / (peak * compute efficiency), bytes / (bandwidth * memory efficiency))
           + launch time

FLOPs are counted for the ops that do arithmetic in bulk (convolutions and their backward,
matrix products, attention); every other op is memory-bound and its FLOPs are 0. Bytes are what
the op's accesses span: read once, written once, or both for a read-write access. The figures,
the efficiencies and their sources are in docs/workloads.md ("The op-time model").
"""

import math

# NVIDIA H100 PCIe (datasheet, "H100 Tensor Core GPU", nvidia.com/en-us/data-center/h100/).
TF32_TENSOR_FLOPS = 378e12   # dense TF32 tensor core (the datasheet's 756 TFLOPS is with sparsity)
FP32_FLOPS = 51e12           # FP32 on CUDA cores (depthwise convolutions, no tensor cores)
HBM_BYTES_PER_S = 2.0e12     # HBM2e, 80 GB
PCIE_BYTES_PER_S = 64e9      # PCIe Gen5 x16: the datasheet's 128 GB/s is both directions

# How much of each peak a kernel of the kind reaches (docs/workloads.md says why these).
TENSOR_EFFICIENCY = 0.5      # cuBLAS/cuDNN GEMMs and convolutions of training-sized layers
FP32_EFFICIENCY = 0.5
MEMORY_EFFICIENCY = 0.8      # streaming element-wise kernels, normalizations, reductions
PCIE_EFFICIENCY = 0.8        # pinned-memory copies of tens of MB and more
LAUNCH_NS = 2000             # a kernel's fixed cost: launch, ramp-up and tail


def _numel(shape):
    return math.prod(shape)


def _conv_flops(input_shape, weight_shape, output_shape, transposed):
    """Multiply-adds times 2 of one convolution (forward, or one of its two backward products).

    A kernel of weight.numel() multiply-adds is applied at every point of the larger side's
    spatial grid: the output's for a convolution, the input's for a transposed one.
    """
    batch = input_shape[0]
    grid = input_shape[2:] if transposed else output_shape[2:]
    return 2 * _numel(weight_shape) * batch * _numel(grid)


def _is_depthwise(weight_shape, groups, transposed):
    """A grouped convolution of one channel per group: no tensor cores, FP32 CUDA cores."""
    if groups <= 1:
        return False
    per_group = weight_shape[0] if transposed else weight_shape[1]
    return per_group == 1


def flops_of(name, args, outputs):
    """(FLOPs, on tensor cores?) of one op from its arguments' and results' shapes."""
    if name in ("aten::mm", "aten::addmm"):
        a, b = (args[0], args[1]) if name == "aten::mm" else (args[1], args[2])
        m, k = a.shape
        n = b.shape[1]
        return 2 * m * n * k, True
    if name in ("aten::bmm", "aten::baddbmm"):
        a, b = (args[0], args[1]) if name == "aten::bmm" else (args[1], args[2])
        batch, m, k = a.shape
        n = b.shape[2]
        return 2 * batch * m * n * k, True
    if name in ("aten::convolution", "aten::_convolution", "aten::convolution_overrideable"):
        inp, weight = args[0], args[1]
        transposed, groups = bool(args[6]), int(args[8])
        flops = _conv_flops(inp.shape, weight.shape, outputs[0].shape, transposed)
        return flops, not _is_depthwise(weight.shape, groups, transposed)
    if name in ("aten::convolution_backward", "aten::convolution_backward_overrideable"):
        grad_output, inp, weight = args[0], args[1], args[2]
        transposed, groups, output_mask = bool(args[7]), int(args[9]), args[10]
        one = _conv_flops(inp.shape, weight.shape, grad_output.shape, transposed)
        products = int(bool(output_mask[0])) + int(bool(output_mask[1]))  # grad input, weight
        return one * products, not _is_depthwise(weight.shape, groups, transposed)
    if "scaled_dot_product" in name or "flash_attention" in name:
        q, k = args[0], args[1]
        # softmax(q k^T) v: two batched products of L x S x E each; backward does twice that.
        *batch, length, embed = q.shape
        flops = 4 * _numel(batch) * length * k.shape[-2] * embed
        return (2 * flops if "backward" in name else flops), True
    return 0, False


def op_time_ns(flops, tensor_cores, nbytes):
    """Nanoseconds of one op on the modelled H100 PCIe (at least the launch time)."""
    peak = (TF32_TENSOR_FLOPS * TENSOR_EFFICIENCY if tensor_cores
            else FP32_FLOPS * FP32_EFFICIENCY)
    compute_s = flops / peak
    memory_s = nbytes / (HBM_BYTES_PER_S * MEMORY_EFFICIENCY)
    return LAUNCH_NS + int(round(max(compute_s, memory_s) * 1e9))


def copy_time_ns(nbytes):
    """Nanoseconds of a host-to-device copy of nbytes over the H100 PCIe's link."""
    return LAUNCH_NS + int(round(nbytes / (PCIE_BYTES_PER_S * PCIE_EFFICIENCY) * 1e9))
