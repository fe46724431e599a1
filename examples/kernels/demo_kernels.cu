// The demo kernels for a real GPU, built into a fatbin that the demo programs load with
// cuModuleLoad. Same names and parameters as the simgpu host library (demo_kernels_host.cc).
#include <cstdint>

#include "examples/kernels/demo_kernels.h"

using spillway_demo::Mix;

extern "C" __global__ void fill(uint32_t* words, uint64_t count, uint32_t seed, uint32_t) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += uint64_t{gridDim.x} * blockDim.x) {
    words[i] = Mix(i, seed);
  }
}

extern "C" __global__ void update(uint32_t* words, uint64_t count, uint32_t mul, uint32_t add) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += uint64_t{gridDim.x} * blockDim.x) {
    words[i] = words[i] * mul + add;
  }
}

extern "C" __global__ void checksum(const uint32_t* words, uint64_t count,
                                    unsigned long long* out) {
  unsigned long long sum = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += uint64_t{gridDim.x} * blockDim.x) {
    sum += words[i];
  }
  atomicAdd(out, sum);
}
