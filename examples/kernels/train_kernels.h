// The training-like workload's kernels (examples/train_like.cc): their names, parameter layouts
// and the per-element formulas, shared by the simgpu host kernel library, the CUDA source for
// real GPUs and the host. All tensors are arrays of uint32_t words and all arithmetic is integer,
// so a run gives bit-identical results on any device and under any residency decisions.
#ifndef SPILLWAY_EXAMPLES_KERNELS_TRAIN_KERNELS_H_
#define SPILLWAY_EXAMPLES_KERNELS_TRAIN_KERNELS_H_

#include <cstdint>

#if defined(__CUDACC__)
#define TRAIN_HD __host__ __device__
#else
#define TRAIN_HD
#endif

namespace spillway_train {

// Kernels and their parameters (every pointer is a CUdeviceptr passed as 8 bytes):
//   tl_fill(out, count, seed, unused32)             out[i] = Hash(i, seed)
//   tl_forward(in, weight, out, count)              out[i] = Forward(in[i], weight[i])
//   tl_loss(act, delta, count, seed)                delta[i] = act[i] ^ Hash(i, seed)
//   tl_backward(act, weight, delta_in, delta_out, grad, count)
//                                                   delta_out[i] = BackwardDelta(...),
//                                                   grad[i] = Gradient(...)
//   tl_update(weight, count, grad_table, index)     weight[i] = Update(weight[i], g[i]) where
//                                                   g = ((uint32_t**)grad_table)[index]: the
//                                                   gradient is reached through a pointer stored
//                                                   in device memory, not through a parameter.
struct FillArgs {
  uint64_t out;
  uint64_t count;
  uint32_t seed;
  uint32_t unused;
};
struct ForwardArgs {
  uint64_t in;
  uint64_t weight;
  uint64_t out;
  uint64_t count;
};
struct LossArgs {
  uint64_t act;
  uint64_t delta;
  uint64_t count;
  uint32_t seed;
  uint32_t unused;
};
struct BackwardArgs {
  uint64_t act;
  uint64_t weight;
  uint64_t delta_in;
  uint64_t delta_out;
  uint64_t grad;
  uint64_t count;
};
struct UpdateArgs {
  uint64_t weight;
  uint64_t count;
  uint64_t grad_table;
  uint64_t index;
};

TRAIN_HD inline uint32_t Rotl(uint32_t x, int bits) { return (x << bits) | (x >> (32 - bits)); }

TRAIN_HD inline uint32_t Hash(uint64_t i, uint32_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return static_cast<uint32_t>(x);
}

TRAIN_HD inline uint32_t Forward(uint32_t in, uint32_t weight) {
  return Rotl(in, 5) * (weight | 1u) + 0x9E3779B9u;
}

TRAIN_HD inline uint32_t BackwardDelta(uint32_t act, uint32_t weight, uint32_t delta) {
  return delta * (weight | 1u) + Rotl(act, 13);
}

TRAIN_HD inline uint32_t Gradient(uint32_t act, uint32_t delta) { return delta ^ Rotl(act, 11); }

TRAIN_HD inline uint32_t Update(uint32_t weight, uint32_t grad) {
  return Rotl(weight, 3) + (grad | 1u);
}

}  // namespace spillway_train

#endif  // SPILLWAY_EXAMPLES_KERNELS_TRAIN_KERNELS_H_
