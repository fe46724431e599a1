// A host kernel library for simgpu's tests (the contract: simgpu/include/simgpu/kernel_library.h).
// Each kernel touches memory through plain pointers; simgpu sees what it really accesses.
#include <unistd.h>

#include <cstdint>

#include "simgpu/kernel_library.h"

namespace {

// touch_chunks(char* base, uint64_t stride, uint32_t count): base[i*stride] += 1 for i < count.
void TouchChunks(const SimgpuLaunch* l) {
  char* base = SimgpuArg<char*>(l, 0);
  uint64_t stride = SimgpuArg<uint64_t>(l, 1);
  uint32_t count = SimgpuArg<uint32_t>(l, 2);
  for (uint32_t i = 0; i < count; ++i) base[i * stride] += 1;
}
const SimgpuParam kTouchParams[] = {{0, 8}, {8, 8}, {16, 4}};

// follow_pointers(char** table, uint32_t n): writes 1 through each pointer stored in `table`.
void FollowPointers(const SimgpuLaunch* l) {
  char** table = SimgpuArg<char**>(l, 0);
  uint32_t n = SimgpuArg<uint32_t>(l, 1);
  for (uint32_t i = 0; i < n; ++i) *table[i] = 1;
}
const SimgpuParam kFollowParams[] = {{0, 8}, {8, 4}};

// slow_store(int* dst, int value): sleeps 50 ms of real time, then stores. 1 ms of device time.
void SlowStore(const SimgpuLaunch* l) {
  usleep(50 * 1000);
  *SimgpuArg<int*>(l, 0) = SimgpuArg<int>(l, 1);
}
double OneMillisecond(const SimgpuLaunch*) { return 1e-3; }
const SimgpuParam kSlowParams[] = {{0, 8}, {8, 4}};

// load(const int* src, int* dst): *dst = *src.
void Load(const SimgpuLaunch* l) { *SimgpuArg<int*>(l, 1) = *SimgpuArg<const int*>(l, 0); }
const SimgpuParam kLoadParams[] = {{0, 8}, {8, 8}};

// timed(double seconds): touches nothing and lasts `seconds` of device time.
void Timed(const SimgpuLaunch*) {}
double TimedSeconds(const SimgpuLaunch* l) { return SimgpuArg<double>(l, 0); }
const SimgpuParam kTimedParams[] = {{0, 8}};

// sum_u32(const uint32_t* src, uint64_t n, uint64_t* out): *out = sum of src[0..n).
void SumU32(const SimgpuLaunch* l) {
  const uint32_t* src = SimgpuArg<const uint32_t*>(l, 0);
  uint64_t n = SimgpuArg<uint64_t>(l, 1);
  uint64_t sum = 0;
  for (uint64_t i = 0; i < n; ++i) sum += src[i];
  *SimgpuArg<uint64_t*>(l, 2) = sum;
}
const SimgpuParam kSumParams[] = {{0, 8}, {8, 8}, {16, 8}};

// grid_product(uint64_t* out): *out = grid x*y*z * block x*y*z (checks launch geometry).
void GridProduct(const SimgpuLaunch* l) {
  *SimgpuArg<uint64_t*>(l, 0) =
      uint64_t{l->grid[0]} * l->grid[1] * l->grid[2] * l->block[0] * l->block[1] * l->block[2];
}
const SimgpuParam kGridParams[] = {{0, 8}};

// scale_add_u32(uint32_t* dst, const uint32_t* src, uint32_t a, uint64_t n):
// dst[i] = dst[i] * a + src[i] (the order of several such launches matters).
void ScaleAddU32(const SimgpuLaunch* l) {
  uint32_t* dst = SimgpuArg<uint32_t*>(l, 0);
  const uint32_t* src = SimgpuArg<const uint32_t*>(l, 1);
  uint32_t a = SimgpuArg<uint32_t>(l, 2);
  uint64_t n = SimgpuArg<uint64_t>(l, 3);
  for (uint64_t i = 0; i < n; ++i) dst[i] = dst[i] * a + src[i];
}
const SimgpuParam kScaleAddParams[] = {{0, 8}, {8, 8}, {16, 4}, {24, 8}};

const SimgpuKernel kKernels[] = {
    {"touch_chunks", 3, kTouchParams, TouchChunks, nullptr},
    {"follow_pointers", 2, kFollowParams, FollowPointers, nullptr},
    {"slow_store", 2, kSlowParams, SlowStore, OneMillisecond},
    {"load", 2, kLoadParams, Load, nullptr},
    {"timed", 1, kTimedParams, Timed, TimedSeconds},
    {"sum_u32", 3, kSumParams, SumU32, nullptr},
    {"grid_product", 1, kGridParams, GridProduct, nullptr},
    {"scale_add_u32", 4, kScaleAddParams, ScaleAddU32, nullptr},
};

const SimgpuKernelLibrary kLibrary = {SIMGPU_KERNEL_ABI_VERSION,
                                      sizeof(kKernels) / sizeof(kKernels[0]), kKernels};

}  // namespace

extern "C" __attribute__((visibility("default"))) const SimgpuKernelLibrary* simgpu_kernel_library(
    void) {
  return &kLibrary;
}
