// Remembers, per kernel and device, how much dynamic shared memory the kernel has been opted into
// (cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize)), so the launchers set the
// attribute once per (kernel, device) instead of before every launch. Plain C++17 with the CUDA
// calls passed in, so the CPU tests drive it with fakes.
#ifndef SPILLWAY_ATTENTION_KERNELS_SRC_SMEM_OPT_IN_H_
#define SPILLWAY_ATTENTION_KERNELS_SRC_SMEM_OPT_IN_H_

#include <algorithm>
#include <atomic>
#include <cstddef>

#include "attention_kernels/src/validate.h"

namespace spillway::attention {

// Dynamic shared memory a block may use without opting in.
inline constexpr std::size_t kDefaultSmemPerBlock = 48 * 1024;

// One kernel's opt-in per device, lock-free (a function-local static per kernel). Two threads
// launching first at once may both set the attribute (harmless: the call is idempotent). Devices
// outside [0, kMaxDevices) are not remembered: their attribute is set before every launch.
class SmemOptIn {
 public:
  static constexpr int kMaxDevices = 64;

  // The bytes the kernel is known to be opted into on `device` (0: none).
  std::size_t Recorded(int device) const {
    return Tracked(device) ? bytes_[device].load(std::memory_order_acquire) : 0;
  }
  // Raises the record for `device` to at least `bytes`.
  void Record(int device, std::size_t bytes) {
    if (!Tracked(device)) return;
    std::size_t seen = bytes_[device].load(std::memory_order_relaxed);
    while (seen < bytes &&
           !bytes_[device].compare_exchange_weak(seen, bytes, std::memory_order_release)) {
    }
  }
  void Forget(int device) {
    if (Tracked(device)) bytes_[device].store(0, std::memory_order_release);
  }

 private:
  static bool Tracked(int device) { return device >= 0 && device < kMaxDevices; }
  std::atomic<std::size_t> bytes_[kMaxDevices] = {};
};

// Launches a kernel that needs `bytes` of dynamic shared memory on `device`:
// `set_attribute(n)` opts the kernel into n bytes, `launch()` enqueues it, both returning a Check.
// The attribute is set only when the record does not cover `bytes` (never at or below the 48 KB
// default). If a launch fails after the record said no call was needed, the record may be stale
// (cudaDeviceReset() drops function attributes): it is forgotten, the attribute set again and the
// launch tried once more. Returns the first failure that ends the attempt.
template <typename SetAttribute, typename Launch>
Check LaunchWithSmemOptIn(SmemOptIn& opt_in, int device, std::size_t bytes,
                          SetAttribute&& set_attribute, Launch&& launch) {
  if (bytes <= kDefaultSmemPerBlock) return launch();
  const std::size_t recorded = opt_in.Recorded(device);
  const bool cached = recorded >= bytes;
  if (!cached) {
    // Never lower an opt-in another call relies on.
    const std::size_t target = std::max(bytes, recorded);
    if (Check c = set_attribute(target); !c.ok()) return c;
    opt_in.Record(device, target);
  }
  Check launched = launch();
  if (launched.ok() || !cached) return launched;
  opt_in.Forget(device);
  if (Check c = set_attribute(bytes); !c.ok()) return c;
  opt_in.Record(device, bytes);
  return launch();
}

}  // namespace spillway::attention

#endif  // SPILLWAY_ATTENTION_KERNELS_SRC_SMEM_OPT_IN_H_
