// The residency engine: plan under the lock, then move data with the lock released.
#include "policy/residency_engine.h"

#include <algorithm>
#include <vector>

namespace spillway::policy {
namespace {

struct Move {
  bool to_device;
  uint64_t base;
  uint64_t size;
};

// Reused per thread, so a warm launch path does not allocate.
thread_local std::vector<Move> t_moves;

struct EvictableContext {
  const void* tracked;
  uint64_t stamp;
};

}  // namespace

ResidencyEngine::ResidencyEngine(Device* device, std::unique_ptr<EvictionPolicy> policy,
                                 uint64_t budget_bytes)
    : device_(device), budget_bytes_(budget_bytes), policy_(std::move(policy)) {}

uint64_t ResidencyEngine::resident_estimate() const {
  std::lock_guard lock(mutex_);
  return resident_bytes_ + fixed_bytes_;
}

void ResidencyEngine::OnAllocated(const Allocation& allocation) {
  std::lock_guard lock(mutex_);
  if (allocation.backing != Backing::kManaged) {
    fixed_bytes_ += allocation.size;
    return;
  }
  tracked_[allocation.id] = Tracked{allocation.base, allocation.size, false, 0};
}

void ResidencyEngine::Forget(const Allocation& allocation) {
  std::lock_guard lock(mutex_);
  if (allocation.backing != Backing::kManaged) {
    fixed_bytes_ -= std::min(fixed_bytes_, allocation.size);
    return;
  }
  const auto it = tracked_.find(allocation.id);
  if (it != tracked_.end()) {
    if (it->second.resident) resident_bytes_ -= it->second.size;
    tracked_.erase(it);
  }
  policy_->Forget(allocation.id);
}

int ResidencyEngine::OnFree(const Allocation& allocation, Stream stream) {
  Forget(allocation);
  if (allocation.backing != Backing::kManaged) return 0;
  if (device_->Discard(allocation.base, allocation.size, stream) != kDeviceOk) return 1;
  discard_bytes_.fetch_add(allocation.size, std::memory_order_relaxed);
  return 0;
}

bool ResidencyEngine::Evictable(const void* context, uint64_t id) {
  const auto* c = static_cast<const EvictableContext*>(context);
  const auto& tracked = *static_cast<const std::unordered_map<uint64_t, Tracked>*>(c->tracked);
  const auto it = tracked.find(id);
  return it != tracked.end() && it->second.resident && it->second.used_by_launch != c->stamp;
}

int ResidencyEngine::OnLaunch(const AccessSet& access, Stream stream) {
  std::vector<Move>& moves = t_moves;
  moves.clear();
  {
    std::lock_guard lock(mutex_);
    const uint64_t stamp = ++launch_stamp_;
    uint64_t needed = 0;
    for (const Allocation& allocation : access) {
      const auto it = tracked_.find(allocation.id);
      if (it == tracked_.end()) continue;
      it->second.used_by_launch = stamp;
      policy_->Touch(allocation.id);
      if (!it->second.resident) needed += it->second.size;
    }
    // Evict until the access set fits beside what stays, or nothing else can go.
    const EvictableContext context{&tracked_, stamp};
    while (fixed_bytes_ + resident_bytes_ + needed > budget_bytes_) {
      const uint64_t victim = policy_->PickVictim(&Evictable, &context);
      if (victim == 0) break;
      Tracked& tracked = tracked_.at(victim);
      tracked.resident = false;
      resident_bytes_ -= tracked.size;
      moves.push_back(Move{false, tracked.base, tracked.size});
    }
    // Prefetch what fits; what does not is left to demand paging.
    for (const Allocation& allocation : access) {
      const auto it = tracked_.find(allocation.id);
      if (it == tracked_.end() || it->second.resident) continue;
      if (fixed_bytes_ + resident_bytes_ + it->second.size > budget_bytes_) continue;
      it->second.resident = true;
      resident_bytes_ += it->second.size;
      moves.push_back(Move{true, it->second.base, it->second.size});
    }
  }
  int failures = 0;
  for (const Move& move : moves) {
    const DeviceResult result = move.to_device
                                    ? device_->PrefetchToDevice(move.base, move.size, stream)
                                    : device_->PrefetchToHost(move.base, move.size, stream);
    if (result != kDeviceOk) {
      ++failures;
    } else {
      (move.to_device ? prefetch_bytes_ : evict_bytes_)
          .fetch_add(move.size, std::memory_order_relaxed);
    }
  }
  return failures;
}

}  // namespace spillway::policy
