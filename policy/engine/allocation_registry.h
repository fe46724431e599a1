// The allocation registry: every live allocation the shim saw, by address. Answers "which
// allocation contains this address" (interior pointers included) for access-set resolution, and
// keeps the live and peak byte counts the exit summary reports. Thread-safe.
#ifndef SPILLWAY_POLICY_ENGINE_ALLOCATION_REGISTRY_H_
#define SPILLWAY_POLICY_ENGINE_ALLOCATION_REGISTRY_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <shared_mutex>
#include <vector>

namespace spillway::policy {

// What memory backs an allocation.
enum class Backing {
  kManaged,  // managed memory: the engine may move it
  kDevice,   // plain device memory (passthrough): counted, never moved
  kVmm,      // cuMemCreate/cuMemMap: counted, never moved
};

struct Allocation {
  uint64_t id = 0;    // allocation order, from 1
  uint64_t base = 0;  // device address
  uint64_t size = 0;  // bytes
  Backing backing = Backing::kDevice;
  bool stream_ordered = false;  // cuMemAllocAsync / cuMemAllocFromPoolAsync
  // True when the job asked for device memory and spillway gave it managed memory instead.
  bool substituted = false;
  int device = 0;  // ordinal of the device whose context was current when it was made
  // Where it was made: the id a recorded trace gives the same calling stack
  // (trace::HashCallSite; interpose/allocation_sites.h); 0 when the run takes no call sites.
  uint64_t call_site = 0;
  // The driver context current when it was made (an opaque handle; 0 when none was): its end
  // frees the allocation.
  uint64_t context = 0;

  bool Contains(uint64_t address) const { return address >= base && address - base < size; }
};

class AllocationRegistry {
 public:
  AllocationRegistry() = default;
  AllocationRegistry(const AllocationRegistry&) = delete;
  AllocationRegistry& operator=(const AllocationRegistry&) = delete;

  // Records an allocation at [base, base + size) and returns it with its id. An allocation
  // already recorded at `base` (freed by a path that is not hooked) is replaced.
  Allocation Insert(uint64_t base, uint64_t size, Backing backing, bool stream_ordered,
                    bool substituted, int device = 0, uint64_t call_site = 0, uint64_t context = 0);

  // Removes the allocation that starts at `base`; nullopt when none does.
  std::optional<Allocation> Erase(uint64_t base);

  // Removes `allocation` if it is still the one at its base (not replaced by a newer one there).
  bool EraseIfCurrent(const Allocation& allocation);

  // The live allocation containing `address`, or nullopt.
  std::optional<Allocation> Find(uint64_t address) const;

  // Find() for many addresses under one lock; `out` gets the distinct allocations found.
  void FindAll(const uint64_t* addresses, size_t count, std::vector<Allocation>* out) const;

  // Every live allocation, in address order.
  std::vector<Allocation> Snapshot() const;

  uint64_t live_bytes() const { return live_bytes_.load(std::memory_order_relaxed); }
  // Of live_bytes(), those of allocations made on device `device` (0 for an ordinal not below
  // kCountedDevices).
  uint64_t live_bytes(int device) const {
    return device >= 0 && device < kCountedDevices
               ? device_live_bytes_[device].load(std::memory_order_relaxed)
               : 0;
  }
  static constexpr int kCountedDevices = 64;
  uint64_t managed_bytes() const { return managed_bytes_.load(std::memory_order_relaxed); }
  uint64_t bytes_peak() const { return bytes_peak_.load(std::memory_order_relaxed); }
  uint64_t managed_bytes_peak() const {
    return managed_bytes_peak_.load(std::memory_order_relaxed);
  }
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  uint64_t vmm_count() const { return vmm_count_.load(std::memory_order_relaxed); }
  // A VMM allocation (cuMemCreate) is counted, not mapped to addresses.
  void CountVmm() { vmm_count_.fetch_add(1, std::memory_order_relaxed); }

  // Fork support: the forking thread takes the lock before fork(); the parent releases it after
  // (UnlockAfterFork). The child must not unlock it: a pthread rwlock records its writer's thread
  // id, which is not the child's, so the unlock would corrupt it and the next lock would hang.
  // Instead the child re-creates the lock and forgets everything (ResetInForkedChild).
  // REQUIRES (ResetInForkedChild): only in a forked child, which has a single thread.
  void LockForFork();
  void UnlockAfterFork();
  void ResetInForkedChild();

 private:
  void AddBytes(const Allocation& allocation);     // REQUIRES: mutex_ held exclusively
  void RemoveBytes(const Allocation& allocation);  // REQUIRES: mutex_ held exclusively

  mutable std::shared_mutex mutex_;
  std::map<uint64_t, Allocation> by_base_;  // guarded by mutex_
  uint64_t next_id_ = 1;                    // guarded by mutex_
  // Written under mutex_, read anywhere.
  std::atomic<uint64_t> live_bytes_{0};
  std::array<std::atomic<uint64_t>, kCountedDevices> device_live_bytes_{};
  std::atomic<uint64_t> managed_bytes_{0};
  std::atomic<uint64_t> bytes_peak_{0};
  std::atomic<uint64_t> managed_bytes_peak_{0};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> vmm_count_{0};
};

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_ENGINE_ALLOCATION_REGISTRY_H_
