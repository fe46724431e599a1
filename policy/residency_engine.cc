// The residency engine: plan under the lock, then move data with the lock released.
#include "policy/residency_engine.h"

#include <algorithm>
#include <vector>

namespace spillway::policy {

// A migration the engine decided on, issued once its lock is released.
struct PlannedMove {
  bool to_device;
  uint64_t id;  // the allocation's, to tell a failed move from one whose allocation was freed
  uint64_t base;
  uint64_t size;
};

namespace {

// Reused per thread, so a warm launch path does not allocate.
thread_local std::vector<PlannedMove> t_moves;
thread_local std::vector<PlannedMove> t_side_moves;
thread_local std::vector<uint64_t> t_ids;
thread_local std::vector<uint64_t> t_sizes;
thread_local std::vector<uint64_t> t_next;

struct EvictableContext {
  const void* tracked;
  uint64_t stamp;
};

}  // namespace

ResidencyEngine::ResidencyEngine(Device* device, std::unique_ptr<EvictionPolicy> policy,
                                 uint64_t budget_bytes, EngineOptions options)
    : device_(device), budget_bytes_(budget_bytes), options_(options), policy_(std::move(policy)) {}

uint64_t ResidencyEngine::resident_estimate() const {
  std::lock_guard lock(mutex_);
  return resident_bytes_ + fixed_bytes_;
}

uint64_t ResidencyEngine::predicted_launches() const {
  std::lock_guard lock(mutex_);
  return policy_->predicted_launches();
}

uint64_t ResidencyEngine::step_length() const {
  std::lock_guard lock(mutex_);
  return policy_->step_length();
}

void ResidencyEngine::OnAllocated(const Allocation& allocation) {
  std::lock_guard lock(mutex_);
  if (allocation.backing != Backing::kManaged) {
    fixed_bytes_ += allocation.size;
    return;
  }
  tracked_[allocation.id] = Tracked{allocation.base, allocation.size, false, 0, 0};
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

bool ResidencyEngine::SideStreamReady() {
  if (options_.lookahead_launches <= 0) return false;
  std::call_once(side_once_, [this] {
    if (device_->CreateSideStream(&side_stream_) != kDeviceOk) return;
    for (Event& event : events_) {
      if (device_->CreateEvent(&event) != kDeviceOk) return;
    }
    side_ready_.store(true, std::memory_order_release);
  });
  return side_ready_.load(std::memory_order_acquire);
}

uint64_t ResidencyEngine::PlanLookahead(uint64_t stamp, std::vector<PlannedMove>* side_moves) {
  std::vector<uint64_t>& next = t_next;
  policy_->PredictNextUses(options_.lookahead_launches, &next);
  if (next.empty()) return 0;
  // What the next launches need is protected like the current access set.
  for (const uint64_t id : next) {
    const auto it = tracked_.find(id);
    if (it != tracked_.end()) it->second.used_by_launch = stamp;
  }
  const uint64_t batch = batches_ + 1;
  const EvictableContext context{&tracked_, stamp};
  for (const uint64_t id : next) {  // nearest use first
    const auto it = tracked_.find(id);
    if (it == tracked_.end() || it->second.resident) continue;
    const uint64_t distance = policy_->NextUse(id);
    // Make room only from allocations needed later than this one (Belady); else stop.
    while (fixed_bytes_ + resident_bytes_ + it->second.size > budget_bytes_) {
      const uint64_t victim = policy_->PickVictim(&Evictable, &context);
      if (victim == 0 || policy_->NextUse(victim) <= distance) break;
      Tracked& tracked = tracked_.at(victim);
      tracked.resident = false;
      tracked.pending_batch = 0;
      resident_bytes_ -= tracked.size;
      side_moves->push_back(PlannedMove{false, victim, tracked.base, tracked.size});
    }
    if (fixed_bytes_ + resident_bytes_ + it->second.size > budget_bytes_) break;
    it->second.resident = true;
    it->second.pending_batch = batch;
    resident_bytes_ += it->second.size;
    side_moves->push_back(PlannedMove{true, it->first, it->second.base, it->second.size});
  }
  if (side_moves->empty()) return 0;
  batches_ = batch;
  return batch;
}

int ResidencyEngine::Issue(const std::vector<PlannedMove>& moves, Stream stream, bool ahead) {
  int failures = 0;
  for (const PlannedMove& move : moves) {
    const DeviceResult result = move.to_device
                                    ? device_->PrefetchToDevice(move.base, move.size, stream)
                                    : device_->PrefetchToHost(move.base, move.size, stream);
    if (result != kDeviceOk) {
      // Another thread may have freed the allocation after the move was planned (moves are
      // issued outside the lock): nothing was lost, so that is not a failure.
      std::lock_guard lock(mutex_);
      if (tracked_.contains(move.id)) ++failures;
    } else if (move.to_device) {
      prefetch_bytes_.fetch_add(move.size, std::memory_order_relaxed);
      if (ahead) lookahead_bytes_.fetch_add(move.size, std::memory_order_relaxed);
    } else {
      evict_bytes_.fetch_add(move.size, std::memory_order_relaxed);
    }
  }
  return failures;
}

int ResidencyEngine::OnLaunch(const AccessSet& access, Stream stream, uint64_t function) {
  std::vector<PlannedMove>& moves = t_moves;
  std::vector<PlannedMove>& side_moves = t_side_moves;
  moves.clear();
  side_moves.clear();
  std::vector<uint64_t>& ids = t_ids;
  std::vector<uint64_t>& sizes = t_sizes;
  ids.clear();
  sizes.clear();
  const bool side = SideStreamReady();
  uint64_t wait_batch = 0, batch = 0;
  {
    std::lock_guard lock(mutex_);
    const uint64_t stamp = ++launch_stamp_;
    for (const Allocation& allocation : access) {
      if (!tracked_.contains(allocation.id)) continue;
      ids.push_back(allocation.id);
      sizes.push_back(allocation.size);
    }
    policy_->ObserveLaunch(LaunchView{function, ids.data(), sizes.data(), ids.size()});
    uint64_t needed = 0;
    for (const Allocation& allocation : access) {
      const auto it = tracked_.find(allocation.id);
      if (it == tracked_.end()) continue;
      it->second.used_by_launch = stamp;
      policy_->Touch(allocation.id);
      if (!it->second.resident) needed += it->second.size;
      // Prefetched ahead and not waited for yet: the launch waits for the newest such batch.
      if (it->second.resident && it->second.pending_batch != 0) {
        wait_batch = std::max(wait_batch, it->second.pending_batch);
        it->second.pending_batch = 0;
      }
    }
    // Evict until the access set fits beside what stays, or nothing else can go.
    const EvictableContext context{&tracked_, stamp};
    while (fixed_bytes_ + resident_bytes_ + needed > budget_bytes_) {
      const uint64_t victim = policy_->PickVictim(&Evictable, &context);
      if (victim == 0) break;
      Tracked& tracked = tracked_.at(victim);
      tracked.resident = false;
      tracked.pending_batch = 0;
      resident_bytes_ -= tracked.size;
      moves.push_back(PlannedMove{false, victim, tracked.base, tracked.size});
    }
    // Prefetch what fits; what does not is left to demand paging.
    for (const Allocation& allocation : access) {
      const auto it = tracked_.find(allocation.id);
      if (it == tracked_.end() || it->second.resident) continue;
      if (fixed_bytes_ + resident_bytes_ + it->second.size > budget_bytes_) continue;
      it->second.resident = true;
      resident_bytes_ += it->second.size;
      moves.push_back(PlannedMove{true, it->first, it->second.base, it->second.size});
    }
    if (side) batch = PlanLookahead(stamp, &side_moves);
  }
  int failures = 0;
  if (wait_batch != 0 &&
      device_->StreamWaitEvent(stream, events_[(2 * wait_batch + 1) % kEvents]) != kDeviceOk) {
    ++failures;
  }
  failures += Issue(moves, stream, false);
  if (batch != 0) {
    // The side stream starts after what the launch stream has so far (the victims' last uses and
    // this launch's own moves), then signals the launches that need its prefetches.
    const Event after_launch_stream = events_[(2 * batch) % kEvents];
    const Event done = events_[(2 * batch + 1) % kEvents];
    if (device_->RecordEvent(after_launch_stream, stream) != kDeviceOk ||
        device_->StreamWaitEvent(side_stream_, after_launch_stream) != kDeviceOk) {
      ++failures;
    }
    failures += Issue(side_moves, side_stream_, true);
    if (device_->RecordEvent(done, side_stream_) != kDeviceOk) ++failures;
  }
  return failures;
}

}  // namespace spillway::policy
