// A simgpu host kernel library for the shim's tests and benchmark: `noop` does nothing, `store`
// writes its second parameter (u32) to the address in its first (u64).
#include <cstdint>
#include <cstring>

#include "simgpu/kernel_library.h"

namespace {

void Noop(const SimgpuLaunch*) {}

void Store(const SimgpuLaunch* launch) {
  uint64_t address = 0;
  uint32_t value = 0;
  std::memcpy(&address, launch->args[0], sizeof(address));
  std::memcpy(&value, launch->args[1], sizeof(value));
  std::memcpy(reinterpret_cast<void*>(address), &value, sizeof(value));
}

double Instant(const SimgpuLaunch*) { return 1e-9; }

constexpr SimgpuParam kStoreParams[] = {{0, 8}, {8, 4}};
constexpr SimgpuKernel kKernels[] = {
    {"noop", 0, nullptr, Noop, Instant},
    {"store", 2, kStoreParams, Store, Instant},
};
constexpr SimgpuKernelLibrary kLibrary = {SIMGPU_KERNEL_ABI_VERSION, 2, kKernels};

}  // namespace

extern "C" __attribute__((visibility("default"))) const SimgpuKernelLibrary* simgpu_kernel_library(
    void) {
  return &kLibrary;
}
