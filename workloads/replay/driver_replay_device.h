// The ReplayDevice over the CUDA driver API: simgpu's libcuda.so.1 when it is on LD_LIBRARY_PATH
// (the kernels then come from libreplay_kernels.so, a host kernel library), the real driver
// otherwise (replay_kernels.fatbin, sm_90). Everything runs on one stream in the trace's order;
// tensors come from cuMemAllocAsync (async), from a caching arena of cuMemAlloc segments (arena,
// caching_arena.h) or from cuMemAllocManaged (managed). Each stretch ends with an event and a
// context synchronize, as the recorded step ended; the events time the steps (simgpu's virtual
// clock on simgpu).
#ifndef SPILLWAY_WORKLOADS_REPLAY_DRIVER_REPLAY_DEVICE_H_
#define SPILLWAY_WORKLOADS_REPLAY_DRIVER_REPLAY_DEVICE_H_

#include <cuda.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "workloads/replay/caching_arena.h"
#include "workloads/replay/replay_device.h"

namespace spillway::replay {

enum class AllocMode { kAsync, kArena, kManaged };
const char* AllocModeName(AllocMode mode);  // "async", "arena", "managed"

class DriverReplayDevice : public ReplayDevice {
 public:
  // Opens device 0 for a run of `stretches` stretches: its primary context, a stream, the
  // kernels built beside this program, the digest buffer (zeroed) and the step events. The
  // kernels touch what `touch` says (replay_kernel_abi.h: kTouchAll or a stride's log2).
  static absl::StatusOr<std::unique_ptr<DriverReplayDevice>> Open(AllocMode alloc, int touch,
                                                                  int stretches);
  ~DriverReplayDevice() override = default;

  absl::StatusOr<uint64_t> Allocate(uint64_t bytes) override;
  absl::Status Free(uint64_t address, uint64_t bytes) override;
  absl::Status Launch(absl::Span<const spillway_replay::ReplaySlot> slots, uint64_t sequence,
                      uint64_t time_ns, int lane, uint32_t kernel) override;
  absl::Status EndStretch(int index) override;
  absl::Status FlipByte(uint64_t address) override;

  // After the run: each stretch's time in milliseconds, from its start (the previous stretch's
  // end) to its end.
  absl::StatusOr<std::vector<double>> StretchMilliseconds();
  // After the run: the digest buffer's words.
  absl::StatusOr<std::array<uint64_t, spillway_replay::kDigestWords>> ReadDigest();
  // Frees the digest, the arena's segments, the events, the stream and the kernels, and
  // releases the context. Call before exit (no CUDA call is made from the destructor).
  absl::Status Close();

  const std::string& device_name() const { return device_name_; }
  bool simgpu() const { return simgpu_; }
  uint64_t device_memory() const { return device_memory_; }
  uint64_t arena_segment_bytes() const { return arena_ ? arena_->segment_bytes() : 0; }

 private:
  DriverReplayDevice() = default;
  absl::Status Init(AllocMode alloc, int touch, int stretches);
  absl::StatusOr<uint64_t> AllocateDirect(uint64_t bytes);
  // The functions of op kind `kernel` (one load of the kernel module per kind, loaded on first
  // use; kinds past kMaxModules share modules round robin).
  absl::StatusOr<const std::array<CUfunction, 3>*> Functions(uint32_t kernel);

  AllocMode alloc_ = AllocMode::kAsync;
  int touch_ = 0;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  static constexpr size_t kMaxModules = 256;
  std::string module_path_;
  std::vector<CUmodule> modules_;                     // by op kind
  std::vector<std::array<CUfunction, 3>> functions_;  // by op kind, then slot count (kSlotVariants)
  unsigned grid_ = 1;
  std::string device_name_;
  bool simgpu_ = false;
  uint64_t device_memory_ = 0;
  uint64_t digest_ = 0;
  std::vector<CUevent> events_;  // events_[0]: the start; events_[i + 1]: stretch i's end
  std::unique_ptr<CachingArena> arena_;
};

}  // namespace spillway::replay

#endif  // SPILLWAY_WORKLOADS_REPLAY_DRIVER_REPLAY_DEVICE_H_
