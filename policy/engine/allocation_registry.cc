// The allocation registry: an ordered map by base address under a reader-writer lock.
#include "policy/engine/allocation_registry.h"

#include <algorithm>
#include <mutex>
#include <new>

namespace spillway::policy {
namespace {

void RaisePeak(std::atomic<uint64_t>& peak, uint64_t value) {
  if (value > peak.load(std::memory_order_relaxed)) peak.store(value, std::memory_order_relaxed);
}

}  // namespace

void AllocationRegistry::AddBytes(const Allocation& allocation) {
  const uint64_t live = live_bytes_.load(std::memory_order_relaxed) + allocation.size;
  live_bytes_.store(live, std::memory_order_relaxed);
  if (allocation.device >= 0 && allocation.device < kCountedDevices) {
    std::atomic<uint64_t>& device_live = device_live_bytes_[allocation.device];
    device_live.store(device_live.load(std::memory_order_relaxed) + allocation.size,
                      std::memory_order_relaxed);
  }
  RaisePeak(bytes_peak_, live);
  if (allocation.backing == Backing::kManaged) {
    const uint64_t managed = managed_bytes_.load(std::memory_order_relaxed) + allocation.size;
    managed_bytes_.store(managed, std::memory_order_relaxed);
    RaisePeak(managed_bytes_peak_, managed);
  }
}

void AllocationRegistry::RemoveBytes(const Allocation& allocation) {
  live_bytes_.store(live_bytes_.load(std::memory_order_relaxed) - allocation.size,
                    std::memory_order_relaxed);
  if (allocation.device >= 0 && allocation.device < kCountedDevices) {
    std::atomic<uint64_t>& device_live = device_live_bytes_[allocation.device];
    device_live.store(device_live.load(std::memory_order_relaxed) - allocation.size,
                      std::memory_order_relaxed);
  }
  if (allocation.backing == Backing::kManaged) {
    managed_bytes_.store(managed_bytes_.load(std::memory_order_relaxed) - allocation.size,
                         std::memory_order_relaxed);
  }
}

Allocation AllocationRegistry::Insert(uint64_t base, uint64_t size, Backing backing,
                                      bool stream_ordered, bool substituted, int device,
                                      uint64_t call_site, uint64_t context) {
  count_.fetch_add(1, std::memory_order_relaxed);
  std::unique_lock lock(mutex_);
  Allocation allocation{next_id_++,  base,   size,      backing, stream_ordered,
                        substituted, device, call_site, context};
  const auto [it, inserted] = by_base_.try_emplace(base, allocation);
  if (!inserted) {
    RemoveBytes(it->second);
    it->second = allocation;
  }
  AddBytes(allocation);
  return allocation;
}

std::optional<Allocation> AllocationRegistry::Erase(uint64_t base) {
  std::unique_lock lock(mutex_);
  const auto it = by_base_.find(base);
  if (it == by_base_.end()) return std::nullopt;
  const Allocation allocation = it->second;
  RemoveBytes(allocation);
  by_base_.erase(it);
  return allocation;
}

bool AllocationRegistry::EraseIfCurrent(const Allocation& allocation) {
  std::unique_lock lock(mutex_);
  const auto it = by_base_.find(allocation.base);
  if (it == by_base_.end() || it->second.id != allocation.id) return false;
  RemoveBytes(it->second);
  by_base_.erase(it);
  return true;
}

std::optional<Allocation> AllocationRegistry::Find(uint64_t address) const {
  std::shared_lock lock(mutex_);
  auto it = by_base_.upper_bound(address);
  if (it == by_base_.begin()) return std::nullopt;
  --it;
  if (!it->second.Contains(address)) return std::nullopt;
  return it->second;
}

void AllocationRegistry::FindAll(const uint64_t* addresses, size_t count,
                                 std::vector<Allocation>* out) const {
  std::shared_lock lock(mutex_);
  if (by_base_.empty()) return;
  for (size_t i = 0; i < count; ++i) {
    auto it = by_base_.upper_bound(addresses[i]);
    if (it == by_base_.begin()) continue;
    --it;
    if (!it->second.Contains(addresses[i])) continue;
    const uint64_t id = it->second.id;
    const bool seen = std::any_of(out->begin(), out->end(),
                                  [id](const Allocation& known) { return known.id == id; });
    if (!seen) out->push_back(it->second);
  }
}

std::vector<Allocation> AllocationRegistry::Snapshot() const {
  std::shared_lock lock(mutex_);
  std::vector<Allocation> all;
  all.reserve(by_base_.size());
  for (const auto& [base, allocation] : by_base_) all.push_back(allocation);
  return all;
}

void AllocationRegistry::LockForFork() { mutex_.lock(); }
void AllocationRegistry::UnlockAfterFork() { mutex_.unlock(); }

void AllocationRegistry::ResetInForkedChild() {
  // The lock is still held by the parent's forking thread; a fresh one replaces it (a pthread
  // rwlock owns no other resources, so nothing leaks). The child has one thread: no lock needed.
  new (&mutex_) std::shared_mutex();
  by_base_.clear();
  for (auto* counter :
       {&live_bytes_, &managed_bytes_, &bytes_peak_, &managed_bytes_peak_, &count_, &vmm_count_}) {
    counter->store(0, std::memory_order_relaxed);
  }
  for (std::atomic<uint64_t>& counter : device_live_bytes_) {
    counter.store(0, std::memory_order_relaxed);
  }
}

}  // namespace spillway::policy
