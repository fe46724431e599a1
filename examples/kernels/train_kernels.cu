// The training-like workload's kernels for a real GPU, built into a fatbin that train_like loads
// with cuModuleLoad. Same names, parameters and formulas as the simgpu host library
// (train_kernels_host.cc); the formulas live in train_kernels.h.
#include <cstdint>

#include "examples/kernels/train_kernels.h"

namespace st = spillway_train;

#define TRAIN_FOR_EACH(i, count)                                                  \
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < (count); \
       i += uint64_t{gridDim.x} * blockDim.x)

extern "C" __global__ void tl_fill(uint32_t* out, uint64_t count, uint32_t seed, uint32_t) {
  TRAIN_FOR_EACH(i, count) out[i] = st::Hash(i, seed);
}

extern "C" __global__ void tl_forward(const uint32_t* in, const uint32_t* weight, uint32_t* out,
                                      uint64_t count) {
  TRAIN_FOR_EACH(i, count) out[i] = st::Forward(in[i], weight[i]);
}

extern "C" __global__ void tl_loss(const uint32_t* act, uint32_t* delta, uint64_t count,
                                   uint32_t seed, uint32_t) {
  TRAIN_FOR_EACH(i, count) delta[i] = act[i] ^ st::Hash(i, seed);
}

extern "C" __global__ void tl_backward(const uint32_t* act, const uint32_t* weight,
                                       const uint32_t* delta_in, uint32_t* delta_out,
                                       uint32_t* grad, uint64_t count) {
  TRAIN_FOR_EACH(i, count) {
    delta_out[i] = st::BackwardDelta(act[i], weight[i], delta_in[i]);
    grad[i] = st::Gradient(act[i], delta_in[i]);
  }
}

// The gradient is reached through a pointer stored in device memory (grad_table[index]).
extern "C" __global__ void tl_update(uint32_t* weight, uint64_t count,
                                     const uint32_t* const* grad_table, uint64_t index) {
  const uint32_t* grad = grad_table[index];
  TRAIN_FOR_EACH(i, count) weight[i] = st::Update(weight[i], grad[i]);
}
