// The residency engine's arenas: a large allocation reached through interior pointers (a caching
// allocator's segment) is tracked per 2 MiB chunk, so a launch moves only the chunks its pointers
// name (see ResidencyEngine::OnLaunch with words).
#include <algorithm>

#include "policy/residency_engine.h"

namespace spillway::policy {

ResidencyEngine::Arena& ResidencyEngine::MakeArena(uint64_t id) {
  const Tracked whole = tracked_.at(id);
  tracked_.erase(id);
  policy_->Split(id);
  if (whole.resident) resident_bytes_ -= whole.footprint;
  Arena& arena = arenas_[id];
  arena.base = whole.base;
  arena.size = whole.size;
  // Split again after a schedule kept it whole: the tensor offsets seen meanwhile still hold, so
  // a pointer names its tensor's chunks, not every chunk up to the arena's end.
  if (const std::vector<uint64_t>* seen = schedule_.SeenOffsets(id); seen != nullptr) {
    arena.offsets = *seen;
  }
  const uint64_t chunks = (whole.size + kArenaChunkBytes - 1) / kArenaChunkBytes;
  for (uint64_t c = 0; c < chunks; ++c) {
    const uint64_t offset = c * kArenaChunkBytes;
    Tracked piece{whole.base + offset,
                  std::min(kArenaChunkBytes, whole.size - offset),
                  whole.resident,
                  0,
                  whole.resident ? whole.pending_batch : 0,
                  0};
    piece.footprint = Footprint(piece.base, piece.size);
    if (piece.resident) resident_bytes_ += piece.footprint;
    tracked_[PieceId(id, c)] = piece;
    policy_->Touch(PieceId(id, c));  // known to the policy, so a resident chunk can be evicted
  }
  return arena;
}

bool ResidencyEngine::ForgetArena(uint64_t id) {
  const auto arena = arenas_.find(id);
  if (arena == arenas_.end()) return false;
  const uint64_t chunks = (arena->second.size + kArenaChunkBytes - 1) / kArenaChunkBytes;
  for (uint64_t c = 0; c < chunks; ++c) {
    const auto it = tracked_.find(PieceId(id, c));
    if (it == tracked_.end()) continue;
    if (it->second.resident) resident_bytes_ -= it->second.footprint;
    tracked_.erase(it);
    policy_->Forget(PieceId(id, c));
  }
  arenas_.erase(arena);
  return true;
}

void ResidencyEngine::MergeArenas() {
  for (const auto& [id, arena] : arenas_) {
    Tracked whole{arena.base, arena.size, false, 0, 0, Footprint(arena.base, arena.size)};
    for (uint64_t c = 0; c * kArenaChunkBytes < arena.size; ++c) {
      const auto it = tracked_.find(PieceId(id, c));
      if (it == tracked_.end()) continue;
      const Tracked& piece = it->second;
      if (piece.resident) {
        whole.resident = true;
        resident_bytes_ -= piece.footprint;
      }
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
      tracked_.erase(it);
      policy_->Forget(PieceId(id, c));
    }
    if (whole.resident) resident_bytes_ += whole.footprint;
    tracked_[id] = whole;
    schedule_.KeepOffsets(id, arena.offsets);
    policy_->Merged(id);
  }
  arenas_.clear();
}

void ResidencyEngine::ExpandAccess(const AccessSet& access, const std::vector<uint64_t>& words,
                                   std::vector<uint64_t>* ids, std::vector<uint64_t>* sizes) {
  // A schedule names whole allocations: with one, arenas stay whole (and split ones are merged).
  const bool arenas_allowed = !policy_->ArenasWhole();
  if (!arenas_allowed && !arenas_.empty()) MergeArenas();
  for (const Allocation& allocation : access) {
    auto arena = arenas_.find(allocation.id);
    if (arena == arenas_.end() && arenas_allowed && allocation.size >= kArenaMinBytes &&
        tracked_.contains(allocation.id) && ReachedInside(allocation, words)) {
      MakeArena(allocation.id);
      arena = arenas_.find(allocation.id);
    }
    if (arena == arenas_.end()) {
      if (!tracked_.contains(allocation.id)) continue;
      ids->push_back(allocation.id);
      sizes->push_back(allocation.size);
      continue;
    }
    ForEachNamedChunk(allocation, words, &arena->second.offsets, [&](uint64_t c) {
      const uint64_t piece = PieceId(allocation.id, c);
      const auto it = tracked_.find(piece);
      if (it == tracked_.end() || std::find(ids->begin(), ids->end(), piece) != ids->end()) {
        return;
      }
      ids->push_back(piece);
      sizes->push_back(it->second.size);
    });
  }
}

}  // namespace spillway::policy
