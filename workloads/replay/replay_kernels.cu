// The replay kernels for a real GPU, built into replay_kernels.fatbin (sm_90) that spillway-replay
// loads with cuModuleLoad when the driver is not simgpu. Same names, parameter and values as the
// simgpu host library (replay_kernels_host.cc; replay_kernel_abi.h): every thread of the grid
// takes units of the op's accesses in turn, the checks are summed per block and added to the
// digest once per block, then each block spins on %globaltimer until the op's recorded time has
// passed since it started, so the kernel lasts the op's time (or its touching, if longer).
#include <cstdint>

#include "workloads/replay/replay_kernel_abi.h"

namespace sr = spillway_replay;

namespace {

__device__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The block's sum of `value` (in thread 0).
__device__ uint64_t BlockSum(uint64_t value, uint64_t* shared) {
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_down_sync(0xffffffffu, value, offset);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  uint64_t total = 0;
  if (threadIdx.x == 0) {
    for (int w = 0; w < (blockDim.x + 31) / 32; ++w) total += shared[w];
  }
  __syncthreads();
  return total;
}

template <int N>
__device__ void RunOp(const sr::ReplayParams<N>& p) {
  __shared__ uint64_t shared[32];
  const uint64_t start = GlobalTimerNs();
  const int slots = sr::ControlSlots(p.control) < N ? sr::ControlSlots(p.control) : N;
  const int touch = sr::ControlTouch(p.control);
  const uint64_t sequence = p.sequence & ~sr::kMark;
  const uint64_t thread = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  const uint64_t threads = uint64_t{gridDim.x} * blockDim.x;
  uint64_t sum = 0;
  uint64_t checked_bytes = 0;
  for (int s = 0; s < slots; ++s) {
    const sr::ReplaySlot& slot = p.slots[s];
    if (slot.pointer == 0) continue;
    const uint64_t offset = sr::KeyOffset(slot.key);
    const uint64_t tag = sr::KeyTag(slot.key);
    const uint32_t mode = sr::ExtentMode(slot.extent);
    auto* base = reinterpret_cast<unsigned char*>(slot.pointer - offset);
    const sr::AccessUnits units = sr::AccessUnits::Of(offset, sr::ExtentBytes(slot.extent), touch);
    const uint64_t count = units.count();
    for (uint64_t u = thread; u < count; u += threads) {
      uint64_t checked = 0;
      sum += sr::TouchUnit(base, units, u, mode, sequence, tag, &checked);
      checked_bytes += checked;
    }
  }
  sum = BlockSum(sum, shared);
  checked_bytes = BlockSum(checked_bytes, shared);
  if (threadIdx.x == 0) {
    auto* digest = reinterpret_cast<unsigned long long*>(p.digest);
    const int lane = sr::ControlLane(p.control);
    atomicAdd(&digest[sr::DigestSumWord(lane)], static_cast<unsigned long long>(sum));
    atomicAdd(&digest[sr::DigestBytesWord(lane)], static_cast<unsigned long long>(checked_bytes));
  }
  const uint64_t time_ns = p.time_ns & ~sr::kMark;
  while (GlobalTimerNs() - start < time_ns) {
  }
}

}  // namespace

extern "C" __global__ void replay_op4(sr::ReplayParams<4> p) { RunOp(p); }
extern "C" __global__ void replay_op16(sr::ReplayParams<16> p) { RunOp(p); }
extern "C" __global__ void replay_op64(sr::ReplayParams<64> p) { RunOp(p); }
