// A simgpu host kernel library for backing_test: `fill(u32* p, u32 value, u64 n)` writes value to
// n words; `sum(const u32* p, u64 n, u64* out)` adds n words into *out.
#include <cstdint>
#include <cstring>

#include "simgpu/kernel_library.h"

namespace {

void Fill(const SimgpuLaunch* launch) {
  auto* words = reinterpret_cast<uint32_t*>(SimgpuArg<uint64_t>(launch, 0));
  const uint32_t value = SimgpuArg<uint32_t>(launch, 1);
  const uint64_t count = SimgpuArg<uint64_t>(launch, 2);
  for (uint64_t i = 0; i < count; ++i) words[i] = value + static_cast<uint32_t>(i);
}

void Sum(const SimgpuLaunch* launch) {
  const auto* words = reinterpret_cast<const uint32_t*>(SimgpuArg<uint64_t>(launch, 0));
  const uint64_t count = SimgpuArg<uint64_t>(launch, 1);
  auto* out = reinterpret_cast<uint64_t*>(SimgpuArg<uint64_t>(launch, 2));
  uint64_t total = 0;
  for (uint64_t i = 0; i < count; ++i) total += words[i];
  *out += total;
}

double Quick(const SimgpuLaunch*) { return 1e-6; }

constexpr SimgpuParam kFillParams[] = {{0, 8}, {8, 4}, {16, 8}};
constexpr SimgpuParam kSumParams[] = {{0, 8}, {8, 8}, {16, 8}};
constexpr SimgpuKernel kKernels[] = {
    {"fill", 3, kFillParams, Fill, Quick},
    {"sum", 3, kSumParams, Sum, Quick},
};
constexpr SimgpuKernelLibrary kLibrary = {SIMGPU_KERNEL_ABI_VERSION, 2, kKernels};

}  // namespace

extern "C" __attribute__((visibility("default"))) const SimgpuKernelLibrary* simgpu_kernel_library(
    void) {
  return &kLibrary;
}
