// How a launch's pointers name the 2 MiB chunks of an arena (a large allocation reached through
// interior pointers, a caching allocator's segment): a pointer names the chunks from it up to the
// next offset into the arena seen so far (the next tensor), or the arena's end. Used by the
// residency engine's arena tracking and by its schedule executor.
#ifndef SPILLWAY_POLICY_ENGINE_ARENA_CHUNKS_H_
#define SPILLWAY_POLICY_ENGINE_ARENA_CHUNKS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "policy/engine/allocation_registry.h"

namespace spillway::policy {

inline constexpr uint64_t kArenaChunkBytes = uint64_t{2} << 20;
// An allocation at least this large reached through an interior pointer is an arena.
inline constexpr uint64_t kArenaMinBytes = 8 * kArenaChunkBytes;
// The most offsets kept per arena.
inline constexpr size_t kMaxArenaOffsets = 4096;

// Adds the offsets of the pointers in `words` into `allocation` to `offsets` (sorted, distinct,
// at most kMaxArenaOffsets), then calls `chunk` with each 2 MiB chunk a pointer names: from its
// offset up to the next offset seen, or the allocation's end. False when no word points into it.
bool ForEachNamedChunk(const Allocation& allocation, const std::vector<uint64_t>& words,
                       std::vector<uint64_t>* offsets, absl::FunctionRef<void(uint64_t)> chunk);

// Whether a word of `words` points into `allocation` other than at its base.
bool ReachedInside(const Allocation& allocation, const std::vector<uint64_t>& words);

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_ENGINE_ARENA_CHUNKS_H_
