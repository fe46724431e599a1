// A simgpu host kernel library for graph_test: `scale_add(u32* dst, const u32* src, u32 a, u64 n)`
// sets dst[i] = dst[i] * a + src[i] (so the order of a chain of launches shows in the result).
#include <cstdint>
#include <cstring>

#include "simgpu/kernel_library.h"

namespace {

void ScaleAdd(const SimgpuLaunch* launch) {
  auto* dst = reinterpret_cast<uint32_t*>(SimgpuArg<uint64_t>(launch, 0));
  const auto* src = reinterpret_cast<const uint32_t*>(SimgpuArg<uint64_t>(launch, 1));
  const uint32_t a = SimgpuArg<uint32_t>(launch, 2);
  const uint64_t n = SimgpuArg<uint64_t>(launch, 3);
  for (uint64_t i = 0; i < n; ++i) dst[i] = dst[i] * a + src[i];
}

double Seconds(const SimgpuLaunch* launch) { return SimgpuArg<uint64_t>(launch, 3) * 8 / 2e12; }

constexpr SimgpuParam kScaleAddParams[] = {{0, 8}, {8, 8}, {16, 4}, {24, 8}};
constexpr SimgpuKernel kKernels[] = {{"scale_add", 4, kScaleAddParams, ScaleAdd, Seconds}};
constexpr SimgpuKernelLibrary kLibrary = {SIMGPU_KERNEL_ABI_VERSION, 1, kKernels};

}  // namespace

extern "C" __attribute__((visibility("default"))) const SimgpuKernelLibrary* simgpu_kernel_library(
    void) {
  return &kLibrary;
}
