// The residency engine: keeps the managed allocations a launch touches on the device within a
// byte budget. On each launch it marks the access set used, evicts the least useful other
// allocations to the host when the access set plus what is resident would exceed the budget, and
// prefetches the access set to the device; every move is ordered on the launch stream, so an
// eviction runs after the victim's last use and a prefetch before the kernel. Frees of managed
// memory are discarded first, so dead data never moves.
//
// Thread-safe. Decisions are made under the engine's lock; device calls are made after it is
// released (never a lock across a driver call).
#ifndef SPILLWAY_POLICY_RESIDENCY_ENGINE_H_
#define SPILLWAY_POLICY_RESIDENCY_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "policy/access_set.h"
#include "policy/allocation_registry.h"
#include "policy/device.h"
#include "policy/eviction_policy.h"

namespace spillway::policy {

class ResidencyEngine {
 public:
  // REQUIRES: `device` outlives the engine.
  ResidencyEngine(Device* device, std::unique_ptr<EvictionPolicy> policy, uint64_t budget_bytes);
  ResidencyEngine(const ResidencyEngine&) = delete;
  ResidencyEngine& operator=(const ResidencyEngine&) = delete;

  // @brief A new live allocation. Managed ones become candidates for moves (not resident yet);
  // the others take a fixed share of the budget.
  void OnAllocated(const Allocation& allocation);

  // @brief `allocation` is about to be freed: forgets it and, if managed, discards its contents
  // on `stream`. Returns the number of device calls that failed (0 or 1).
  int OnFree(const Allocation& allocation, Stream stream);

  // @brief `allocation` is gone already (freed by the job through a path the engine does not
  // front): forgets it, no device call.
  void Forget(const Allocation& allocation);

  // @brief A kernel that may touch `access` is about to be launched on `stream`. Evicts and
  // prefetches as described above. Returns the number of device calls that failed.
  int OnLaunch(const AccessSet& access, Stream stream);

  std::string_view policy_name() const { return policy_->name(); }
  uint64_t budget_bytes() const { return budget_bytes_; }
  uint64_t prefetch_bytes() const { return prefetch_bytes_.load(std::memory_order_relaxed); }
  uint64_t evict_bytes() const { return evict_bytes_.load(std::memory_order_relaxed); }
  uint64_t discard_bytes() const { return discard_bytes_.load(std::memory_order_relaxed); }
  // Bytes the engine believes are on the device: resident managed + fixed (device) allocations.
  uint64_t resident_estimate() const;

 private:
  struct Tracked {
    uint64_t base = 0;
    uint64_t size = 0;
    bool resident = false;
    uint64_t used_by_launch = 0;  // the launch stamp of the last launch whose access set had it
  };
  static bool Evictable(const void* context, uint64_t id);

  Device* const device_;
  const uint64_t budget_bytes_;
  mutable std::mutex mutex_;
  std::unique_ptr<EvictionPolicy> policy_;        // guarded by mutex_
  std::unordered_map<uint64_t, Tracked> tracked_;  // managed allocations by id; guarded by mutex_
  uint64_t resident_bytes_ = 0;                   // guarded by mutex_
  uint64_t fixed_bytes_ = 0;                      // guarded by mutex_
  uint64_t launch_stamp_ = 0;                     // guarded by mutex_
  std::atomic<uint64_t> prefetch_bytes_{0};
  std::atomic<uint64_t> evict_bytes_{0};
  std::atomic<uint64_t> discard_bytes_{0};
};

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_RESIDENCY_ENGINE_H_
