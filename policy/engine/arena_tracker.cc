// The residency engine's arena tracker (policy/engine/arena_tracker.h).
#include "policy/engine/arena_tracker.h"

#include <algorithm>

#include "policy/engine/arena_chunks.h"

namespace spillway::policy {

ArenaTracker::Arena& ArenaTracker::Split(uint64_t id, const Residency& residency) {
  TrackedMap& tracked = *residency.tracked;
  uint64_t& resident_bytes = *residency.resident_bytes;
  const TrackedAllocation whole = tracked.at(id);
  tracked.erase(id);
  residency.policy->Split(id);
  resident_bytes -= OnDevice(whole);
  Arena& arena = arenas_[id];
  arena.base = whole.base;
  arena.size = whole.size;
  // Split again after a schedule kept it whole: the tensor offsets seen meanwhile still hold, so
  // a pointer names its tensor's chunks, not every chunk up to the arena's end.
  if (const std::vector<uint64_t>* seen = residency.schedule->SeenOffsets(id); seen != nullptr) {
    arena.offsets = *seen;
  }
  const uint64_t chunks = (whole.size + kArenaChunkBytes - 1) / kArenaChunkBytes;
  for (uint64_t c = 0; c < chunks; ++c) {
    const uint64_t offset = c * kArenaChunkBytes;
    TrackedAllocation piece;
    piece.base = whole.base + offset;
    piece.size = std::min(kArenaChunkBytes, whole.size - offset);
    // A chunk of an arena a schedule left partly on the device is resident if any of it is there
    // (the count errs high, so the engine's moves never overfill the device).
    piece.resident = AnyOnDevice(whole, piece.base, piece.size);
    piece.pending_batch = piece.resident ? whole.pending_batch : 0;
    piece.footprint = GranuleFootprint(piece.base, piece.size, residency.granule);
    if (piece.resident) resident_bytes += piece.footprint;
    tracked[ArenaPieceId(id, c)] = piece;
    residency.policy->Touch(
        ArenaPieceId(id, c));  // known to the policy, so a resident chunk can be evicted
  }
  return arena;
}

bool ArenaTracker::Forget(uint64_t id, const Residency& residency) {
  TrackedMap& tracked = *residency.tracked;
  uint64_t& resident_bytes = *residency.resident_bytes;
  const auto arena = arenas_.find(id);
  if (arena == arenas_.end()) return false;
  const uint64_t chunks = (arena->second.size + kArenaChunkBytes - 1) / kArenaChunkBytes;
  for (uint64_t c = 0; c < chunks; ++c) {
    const auto it = tracked.find(ArenaPieceId(id, c));
    if (it == tracked.end()) continue;
    MarkAbsent(&it->second, &resident_bytes);
    tracked.erase(it);
    residency.policy->Forget(ArenaPieceId(id, c));
  }
  arenas_.erase(arena);
  return true;
}

void ArenaTracker::MergeAll(const Residency& residency) {
  TrackedMap& tracked = *residency.tracked;
  uint64_t& resident_bytes = *residency.resident_bytes;
  for (const auto& [id, arena] : arenas_) {
    TrackedAllocation whole;
    whole.base = arena.base;
    whole.size = arena.size;
    whole.footprint = GranuleFootprint(arena.base, arena.size, residency.granule);
    std::vector<std::pair<uint64_t, uint64_t>> in;  // the resident chunks' ranges
    for (uint64_t c = 0; c * kArenaChunkBytes < arena.size; ++c) {
      const auto it = tracked.find(ArenaPieceId(id, c));
      if (it == tracked.end()) continue;
      TrackedAllocation& piece = it->second;
      if (OnDevice(piece) != 0) in.emplace_back(piece.base, piece.size);
      MarkAbsent(&piece, &resident_bytes);
      whole.pending_batch = std::max(whole.pending_batch, piece.pending_batch);
      if (piece.used_by_launch >= whole.used_by_launch) {
        whole.used_by_launch = piece.used_by_launch;
        whole.last_stream = piece.last_stream;
      }
      whole.launched = whole.launched || piece.launched;
      if (piece.evict_seq > whole.evict_seq) {
        whole.evict_seq = piece.evict_seq;
        whole.evicted_on = piece.evicted_on;
      }
      tracked.erase(it);
      residency.policy->Forget(ArenaPieceId(id, c));
    }
    // Partly resident as its chunks were (a chunk of an arena not 2 MiB-aligned counts as there if
    // either piece over it was: the count errs high, so the engine's moves never overfill).
    for (const auto& [base, size] : in) {
      MovePart(&whole, base, size, /*in=*/true, residency.granule, &resident_bytes);
    }
    tracked[id] = whole;
    residency.schedule->KeepOffsets(id, arena.offsets);
    residency.policy->Merged(id);
  }
  arenas_.clear();
}

void ArenaTracker::ExpandAccess(const AccessSet& access, const std::vector<uint64_t>& words,
                                const Residency& residency, std::vector<uint64_t>* ids,
                                std::vector<uint64_t>* sizes) {
  const TrackedMap& tracked = *residency.tracked;
  // A schedule names whole allocations: with one, arenas stay whole (and split ones are merged).
  const bool arenas_allowed = !residency.policy->ArenasWhole();
  if (!arenas_allowed && !arenas_.empty()) MergeAll(residency);
  for (const Allocation& allocation : access) {
    auto arena = arenas_.find(allocation.id);
    if (arena == arenas_.end() && arenas_allowed && allocation.size >= kArenaMinBytes &&
        tracked.contains(allocation.id) && ReachedInside(allocation, words)) {
      Split(allocation.id, residency);
      arena = arenas_.find(allocation.id);
    }
    if (arena == arenas_.end()) {
      if (!tracked.contains(allocation.id)) continue;
      ids->push_back(allocation.id);
      sizes->push_back(allocation.size);
      continue;
    }
    ForEachNamedChunk(allocation, words, &arena->second.offsets, [&](uint64_t c) {
      const uint64_t piece = ArenaPieceId(allocation.id, c);
      const auto it = tracked.find(piece);
      if (it == tracked.end() || std::find(ids->begin(), ids->end(), piece) != ids->end()) {
        return;
      }
      ids->push_back(piece);
      sizes->push_back(it->second.size);
    });
  }
}

void ArenaTracker::ForEachTouched(
    const Allocation& allocation, uint64_t from, uint64_t to, TrackedMap& tracked,
    absl::FunctionRef<void(TrackedAllocation&, uint64_t)> visit) const {
  auto touched = [&](uint64_t id) {
    const auto it = tracked.find(id);
    if (it != tracked.end() && it->second.base < to && from < it->second.base + it->second.size) {
      visit(it->second, id);
    }
  };
  if (!arenas_.contains(allocation.id)) {
    touched(allocation.id);
    return;
  }
  const uint64_t first = (from - allocation.base) / kArenaChunkBytes;
  for (uint64_t c = first; c * kArenaChunkBytes < to - allocation.base; ++c) {
    touched(ArenaPieceId(allocation.id, c));
  }
}

}  // namespace spillway::policy
