// The residency engine's side of planned schedules (policy files, policy/planned_policy.h): when
// the policy's schedule decides a launch, its moves replace the engine's own eviction, prefetch
// and lookahead for that launch. With side streams, evictions go on the evict stream after what
// the launch stream has issued so far (so an eviction follows the victim's last use), and
// prefetches on the side stream after the newest evictions (the room they need), not after the
// launch stream, so they overlap the kernels; a launch that uses a chunk range prefetched on the
// side stream waits for it. Without side streams, all go on the launch stream before the kernel.
#include <algorithm>
#include <vector>

#include "policy/residency_engine.h"

namespace spillway::policy {
namespace {

struct ResolvedMove {
  ScheduledMove::Kind kind;
  uint64_t id;
  uint64_t address;
  uint64_t bytes;
};

// Moves that bring data to the device; the others (evict, discard) send it away.
bool IsIncoming(ScheduledMove::Kind kind) {
  return kind == ScheduledMove::Kind::kPrefetch || kind == ScheduledMove::Kind::kPopulate;
}

// Reused per thread, so a warm launch path does not allocate.
thread_local std::vector<ScheduledMove> t_scheduled;
thread_local std::vector<ResolvedMove> t_resolved;

}  // namespace

bool ResidencyEngine::adherence(ScheduleAdherence* out) const {
  std::lock_guard lock(mutex_);
  const ScheduleAdherence* a = policy_->adherence();
  if (a == nullptr) return false;
  *out = *a;
  return true;
}

bool ResidencyEngine::PlanScheduled(const std::vector<uint64_t>& ids, bool side, uint64_t* batch,
                                    bool* wait_now, uint64_t* wait_evicted) {
  std::vector<ResolvedMove>& resolved = t_resolved;
  resolved.clear();
  if (!policy_->ScheduledMoves(&t_scheduled)) return false;
  for (const ScheduledMove& move : t_scheduled) {
    const auto it = tracked_.find(move.id);
    if (it == tracked_.end() || move.offset >= it->second.size) continue;
    Tracked& tracked = it->second;
    const uint64_t bytes = std::min(move.bytes, tracked.size - move.offset);
    resolved.push_back(ResolvedMove{move.kind, move.id, tracked.base + move.offset, bytes});
    // Residency is tracked per allocation: any part gone counts as gone, any part in as in.
    const bool in =
        move.kind == ScheduledMove::Kind::kPrefetch || move.kind == ScheduledMove::Kind::kPopulate;
    if (!in && tracked.resident) {
      tracked.resident = false;
      tracked.pending_batch = 0;
      resident_bytes_ -= tracked.footprint;
    } else if (in && !tracked.resident) {
      tracked.resident = true;
      resident_bytes_ += tracked.footprint;
    }
  }
  if (resolved.empty() || !side) return true;
  *batch = ++batches_;
  for (const ResolvedMove& move : resolved) {
    if (!IsIncoming(move.kind)) {
      last_evict_batch_ = *batch;  // its evictions go on the evict stream
      continue;
    }
    if (std::find(ids.begin(), ids.end(), move.id) != ids.end()) {
      *wait_now = true;  // this launch uses it: it waits for the batch right after issuing it
    } else {
      tracked_.at(move.id).pending_batch = *batch;  // the launch that uses it waits
    }
  }
  *wait_evicted = last_evict_batch_;
  return true;
}

int ResidencyEngine::IssueScheduled(Stream stream, MoveSet set) {
  int failures = 0;
  for (const ResolvedMove& move : t_resolved) {
    if ((set == MoveSet::kOutgoing && IsIncoming(move.kind)) ||
        (set == MoveSet::kIncoming && !IsIncoming(move.kind))) {
      continue;
    }
    DeviceResult result = kDeviceOk;
    switch (move.kind) {
      // A plan's discard (dead data) and populate (not yet written) are decided from the kernels
      // alone: a host copy or fill the plan does not see (cuMemcpy*, cuMemset* on the job's
      // streams) may still read or have written the data, and dropping it would change the job's
      // results. So they are executed as a write-back and a plain prefetch; on a page that holds
      // no data the prefetch populates it on the device without a copy, as a populate would.
      case ScheduledMove::Kind::kEvict:
      case ScheduledMove::Kind::kDiscard:
        result = device_->PrefetchToHost(move.address, move.bytes, stream);
        if (result == kDeviceOk) evict_bytes_.fetch_add(move.bytes, std::memory_order_relaxed);
        break;
      case ScheduledMove::Kind::kPopulate:
      case ScheduledMove::Kind::kPrefetch:
        result = device_->PrefetchToDevice(move.address, move.bytes, stream);
        if (result == kDeviceOk) prefetch_bytes_.fetch_add(move.bytes, std::memory_order_relaxed);
        break;
    }
    if (result != kDeviceOk) {
      // As in Issue: a move whose allocation was freed meanwhile lost nothing.
      std::lock_guard lock(mutex_);
      if (tracked_.contains(move.id)) ++failures;
    }
  }
  return failures;
}

}  // namespace spillway::policy
