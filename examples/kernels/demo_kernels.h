// The demo kernels' parameter layouts, shared by the host kernel library (simgpu), the CUDA
// source (real GPUs) and the programs that launch them. All kernels work on uint32_t words.
#ifndef SPILLWAY_EXAMPLES_KERNELS_DEMO_KERNELS_H_
#define SPILLWAY_EXAMPLES_KERNELS_DEMO_KERNELS_H_

#include <cstdint>

namespace spillway_demo {

// fill(words, count, seed, unused): words[i] = Mix(i, seed).
// update(words, count, mul, add): words[i] = words[i] * mul + add.
// checksum(words, count, out): *out += sum of words[i] (64-bit, wrapping).
struct WordsArgs {
  uint64_t words;  // CUdeviceptr
  uint64_t count;
  uint32_t a;
  uint32_t b;
};
struct ChecksumArgs {
  uint64_t words;  // CUdeviceptr
  uint64_t count;
  uint64_t out;  // CUdeviceptr of one uint64_t
};

// The value fill() stores at index i: a cheap integer hash, identical on host and device.
#if defined(__CUDACC__)
__host__ __device__
#endif
    inline uint32_t
    Mix(uint64_t i, uint32_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return static_cast<uint32_t>(x);
}

}  // namespace spillway_demo

#endif  // SPILLWAY_EXAMPLES_KERNELS_DEMO_KERNELS_H_
