// The demo kernels as a simgpu host kernel library (see simgpu/include/simgpu/kernel_library.h).
// Each kernel walks its whole range on the host; simgpu sees its real memory accesses.
#include <cstring>

#include "examples/kernels/demo_kernels.h"
#include "simgpu/kernel_library.h"

namespace spillway_demo {
namespace {

// Simulated HBM bandwidth used to declare each kernel's compute time (H100: about 2 TB/s).
constexpr double kDeviceBytesPerSecond = 2.0e12;

uint32_t* Words(const SimgpuLaunch* launch) {
  return reinterpret_cast<uint32_t*>(SimgpuArg<uint64_t>(launch, 0));
}

void Fill(const SimgpuLaunch* launch) {
  uint32_t* words = Words(launch);
  const uint64_t count = SimgpuArg<uint64_t>(launch, 1);
  const uint32_t seed = SimgpuArg<uint32_t>(launch, 2);
  for (uint64_t i = 0; i < count; ++i) words[i] = Mix(i, seed);
}

void Update(const SimgpuLaunch* launch) {
  uint32_t* words = Words(launch);
  const uint64_t count = SimgpuArg<uint64_t>(launch, 1);
  const uint32_t mul = SimgpuArg<uint32_t>(launch, 2);
  const uint32_t add = SimgpuArg<uint32_t>(launch, 3);
  for (uint64_t i = 0; i < count; ++i) words[i] = words[i] * mul + add;
}

void Checksum(const SimgpuLaunch* launch) {
  const uint32_t* words = Words(launch);
  const uint64_t count = SimgpuArg<uint64_t>(launch, 1);
  auto* out = reinterpret_cast<uint64_t*>(SimgpuArg<uint64_t>(launch, 2));
  uint64_t sum = 0;
  for (uint64_t i = 0; i < count; ++i) sum += words[i];
  *out += sum;
}

// Time on the simulated device: bytes read and written at HBM bandwidth.
double WriteTime(const SimgpuLaunch* launch) {
  return 4.0 * static_cast<double>(SimgpuArg<uint64_t>(launch, 1)) / kDeviceBytesPerSecond;
}
double ReadWriteTime(const SimgpuLaunch* launch) { return 2.0 * WriteTime(launch); }

constexpr SimgpuParam kWordsParams[] = {{0, 8}, {8, 8}, {16, 4}, {20, 4}};
constexpr SimgpuParam kChecksumParams[] = {{0, 8}, {8, 8}, {16, 8}};

constexpr SimgpuKernel kKernels[] = {
    {"fill", 4, kWordsParams, Fill, WriteTime},
    {"update", 4, kWordsParams, Update, ReadWriteTime},
    {"checksum", 3, kChecksumParams, Checksum, WriteTime},
};

constexpr SimgpuKernelLibrary kLibrary = {SIMGPU_KERNEL_ABI_VERSION, 3, kKernels};

}  // namespace
}  // namespace spillway_demo

extern "C" __attribute__((visibility("default"))) const SimgpuKernelLibrary*
simgpu_kernel_library() {
  return &spillway_demo::kLibrary;
}
