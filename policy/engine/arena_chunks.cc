// How a launch's pointers name an arena's chunks (policy/engine/arena_chunks.h).
#include "policy/engine/arena_chunks.h"

#include <algorithm>

namespace spillway::policy {

bool ForEachNamedChunk(const Allocation& allocation, const std::vector<uint64_t>& words,
                       std::vector<uint64_t>* offsets, absl::FunctionRef<void(uint64_t)> chunk) {
  bool named = false;
  for (const uint64_t word : words) {
    if (!allocation.Contains(word)) continue;
    const uint64_t offset = word - allocation.base;
    const auto at = std::lower_bound(offsets->begin(), offsets->end(), offset);
    if ((at == offsets->end() || *at != offset) && offsets->size() < kMaxArenaOffsets) {
      offsets->insert(at, offset);
    }
  }
  for (const uint64_t word : words) {
    if (!allocation.Contains(word)) continue;
    const uint64_t offset = word - allocation.base;
    // The pointer names the arena up to the next offset seen (the next tensor), or its end.
    const auto next = std::upper_bound(offsets->begin(), offsets->end(), offset);
    const uint64_t end = next == offsets->end() ? allocation.size : *next;
    for (uint64_t c = offset / kArenaChunkBytes; c <= (end - 1) / kArenaChunkBytes; ++c) chunk(c);
    named = true;
  }
  return named;
}

bool ReachedInside(const Allocation& allocation, const std::vector<uint64_t>& words) {
  return std::any_of(words.begin(), words.end(), [&allocation](uint64_t word) {
    return word != allocation.base && allocation.Contains(word);
  });
}

}  // namespace spillway::policy
