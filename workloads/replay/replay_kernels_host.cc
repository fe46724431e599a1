// The replay kernels as a simgpu host kernel library (simgpu/include/simgpu/kernel_library.h):
// replay_op4, replay_op16 and replay_op64 touch what one recorded op touches (reads read, writes
// written, read-writes both, as replay_kernel_abi.h defines the values) and declare the op's
// recorded time as their compute time, so simgpu's virtual clock runs each op as long as it ran
// when it was recorded, plus whatever migration it waits for.
#include <cstring>

#include "simgpu/kernel_library.h"
#include "workloads/replay/replay_kernel_abi.h"

namespace spillway_replay {
namespace {

template <int N>
ReplayParams<N> Params(const SimgpuLaunch* launch) {
  ReplayParams<N> params;
  std::memcpy(&params, launch->args[0], sizeof(params));
  return params;
}

template <int N>
void RunOp(const SimgpuLaunch* launch) {
  const ReplayParams<N> p = Params<N>(launch);
  const int slots = ControlSlots(p.control) < N ? ControlSlots(p.control) : N;
  const int touch = ControlTouch(p.control);
  const uint64_t sequence = p.sequence & ~kMark;
  uint64_t sum = 0;
  uint64_t checked_bytes = 0;
  for (int s = 0; s < slots; ++s) {
    const ReplaySlot& slot = p.slots[s];
    if (slot.pointer == 0) continue;
    const uint64_t offset = KeyOffset(slot.key);
    const uint64_t tag = KeyTag(slot.key);
    const uint32_t mode = ExtentMode(slot.extent);
    auto* base = reinterpret_cast<unsigned char*>(slot.pointer - offset);
    const AccessUnits units = AccessUnits::Of(offset, ExtentBytes(slot.extent), touch);
    const uint64_t count = units.count();
    for (uint64_t u = 0; u < count; ++u) {
      uint64_t checked = 0;
      sum += TouchUnit(base, units, u, mode, sequence, tag, &checked);
      checked_bytes += checked;
    }
  }
  auto* digest = reinterpret_cast<uint64_t*>(p.digest);
  const int lane = ControlLane(p.control);
  digest[DigestSumWord(lane)] += sum;
  digest[DigestBytesWord(lane)] += checked_bytes;
}

template <int N>
double OpSeconds(const SimgpuLaunch* launch) {
  return static_cast<double>(Params<N>(launch).time_ns & ~kMark) * 1e-9;
}

constexpr SimgpuParam kParams4[] = {{0, sizeof(ReplayParams<4>)}};
constexpr SimgpuParam kParams16[] = {{0, sizeof(ReplayParams<16>)}};
constexpr SimgpuParam kParams64[] = {{0, sizeof(ReplayParams<64>)}};

constexpr SimgpuKernel kKernels[] = {
    {"replay_op4", 1, kParams4, RunOp<4>, OpSeconds<4>},
    {"replay_op16", 1, kParams16, RunOp<16>, OpSeconds<16>},
    {"replay_op64", 1, kParams64, RunOp<64>, OpSeconds<64>},
};

constexpr SimgpuKernelLibrary kLibrary = {SIMGPU_KERNEL_ABI_VERSION, 3, kKernels};

}  // namespace
}  // namespace spillway_replay

extern "C" __attribute__((visibility("default"))) const SimgpuKernelLibrary*
simgpu_kernel_library() {
  return &spillway_replay::kLibrary;
}
