// A small training step on the training-like kernels whose every access is visible in the kernel
// parameters, so a policy::Workload built from the same description (planned_policy_test.cc) is
// exactly what the residency engine sees: persistent weights W[l] and gradients G[l], then per
// step an input, one activation per layer (forward), a loss delta, and per layer in reverse a new
// delta and the gradient (backward), freeing activations and deltas as it goes. One stream;
// the step's tensors stream-ordered (cuMemAllocAsync/cuMemFreeAsync on it, as PyTorch's
// cudaMallocAsync backend makes them), so that no free synchronizes the host with the device.
// Prints "checksum 0x..." over the final gradients (integer arithmetic: the same on any device and
// under any residency decisions).
//
//   planned_step_program LAYERS STEPS TENSOR_BYTES
#include <cuda.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "examples/example_util.h"

namespace {

using spillway_demo::GetKernel;

CUdeviceptr Alloc(uint64_t bytes) {
  CUdeviceptr p = 0;
  DEMO_CHECK(cuMemAlloc(&p, bytes));
  return p;
}

CUdeviceptr AllocOn(CUstream stream, uint64_t bytes) {
  CUdeviceptr p = 0;
  DEMO_CHECK(cuMemAllocAsync(&p, bytes, stream));
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: planned_step_program LAYERS STEPS TENSOR_BYTES\n");
    return spillway_demo::kExitError;
  }
  const size_t layers = std::strtoul(argv[1], nullptr, 10);
  const int steps = std::atoi(argv[2]);
  const uint64_t bytes = std::strtoull(argv[3], nullptr, 10);
  uint64_t count = bytes / sizeof(uint32_t);
  const spillway_demo::OpenedDevice opened = spillway_demo::OpenDevice();
  const CUmodule module = spillway_demo::LoadKernels(opened.device, "train_kernels");
  const CUfunction fill = GetKernel(module, "tl_fill"), forward = GetKernel(module, "tl_forward"),
                   loss = GetKernel(module, "tl_loss"), backward = GetKernel(module, "tl_backward");
  CUstream stream = nullptr;
  DEMO_CHECK(cuStreamCreate(&stream, CU_STREAM_DEFAULT));
  auto launch = [stream](CUfunction f, void** params) {
    DEMO_CHECK(cuLaunchKernel(f, 1024, 1, 1, 256, 1, 1, 0, stream, params, nullptr));
  };
  auto fill_with = [&](CUdeviceptr out, uint32_t seed) {
    uint32_t unused = 0;
    void* params[] = {&out, &count, &seed, &unused};
    launch(fill, params);
  };

  std::vector<CUdeviceptr> weights(layers), grads(layers);
  for (size_t l = 0; l < layers; ++l) weights[l] = Alloc(bytes);
  for (size_t l = 0; l < layers; ++l) grads[l] = Alloc(bytes);
  for (size_t l = 0; l < layers; ++l) fill_with(weights[l], 100 + static_cast<uint32_t>(l));
  for (size_t l = 0; l < layers; ++l) fill_with(grads[l], 200 + static_cast<uint32_t>(l));

  for (int s = 0; s < steps; ++s) {
    std::vector<CUdeviceptr> act(layers + 1);
    act[0] = AllocOn(stream, bytes);
    fill_with(act[0], 1000 + static_cast<uint32_t>(s));
    for (size_t l = 0; l < layers; ++l) {
      act[l + 1] = AllocOn(stream, bytes);
      void* params[] = {&act[l], &weights[l], &act[l + 1], &count};
      launch(forward, params);
    }
    CUdeviceptr delta = AllocOn(stream, bytes);
    {
      uint32_t seed = 7, unused = 0;
      void* params[] = {&act[layers], &delta, &count, &seed, &unused};
      launch(loss, params);
    }
    DEMO_CHECK(cuMemFreeAsync(act[layers], stream));
    for (size_t l = layers; l-- > 0;) {
      CUdeviceptr delta_out = AllocOn(stream, bytes);
      void* params[] = {&act[l], &weights[l], &delta, &delta_out, &grads[l], &count};
      launch(backward, params);
      DEMO_CHECK(cuMemFreeAsync(act[l], stream));
      DEMO_CHECK(cuMemFreeAsync(delta, stream));
      delta = delta_out;
    }
    DEMO_CHECK(cuMemFreeAsync(delta, stream));
  }
  DEMO_CHECK(cuStreamSynchronize(stream));

  uint64_t hash = 0xCBF29CE484222325ull;  // FNV-1a over the gradients' words
  std::vector<uint32_t> host(count);
  for (const CUdeviceptr g : grads) {
    DEMO_CHECK(cuMemcpyDtoH(host.data(), g, bytes));
    for (const uint32_t word : host) hash = (hash ^ word) * 1099511628211ull;
  }
  std::printf("checksum 0x%016" PRIx64 "\n", hash);
  return spillway_demo::kExitOk;
}
