// A small model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), for
// `spillway-replay --alloc arena`: tensors are carved out of large segments the driver allocates
// once (cuMemAlloc) and never gets back, as a PyTorch job's memory looks to the driver.
//   - A request is rounded up to 512 bytes. Requests up to 1 MiB come from the small pool, larger
//     ones from the large pool.
//   - The best fit: the smallest free block of the pool that holds the request (the lowest
//     address among equals); a new segment only when none does: 2 MiB for the small pool, 20 MiB
//     for requests under 10 MiB, else the request rounded up to 2 MiB.
//   - A block is split when what is left is at least 512 bytes (small pool) or more than 1 MiB
//     (large pool); otherwise the request gets the whole block.
//   - A freed block is free at once (one stream: later work is ordered after the free) and joins
//     its free neighbours in the segment. Segments are never returned.
// Not modelled: streams, events, the out-of-memory retry that empties the cache,
// expandable segments, max_split_size and the other PYTORCH_CUDA_ALLOC_CONF settings.
#ifndef SPILLWAY_WORKLOADS_REPLAY_CACHING_ARENA_H_
#define SPILLWAY_WORKLOADS_REPLAY_CACHING_ARENA_H_

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"

namespace spillway::replay {

class CachingArena {
 public:
  static constexpr uint64_t kMinBlock = 512;
  static constexpr uint64_t kSmallSize = 1 << 20;       // small pool: requests up to this
  static constexpr uint64_t kSmallSegment = 2 << 20;    // its segments
  static constexpr uint64_t kMinLargeAlloc = 10 << 20;  // below this: kLargeSegment
  static constexpr uint64_t kLargeSegment = 20 << 20;
  static constexpr uint64_t kRoundLarge = 2 << 20;

  // `allocate_segment(bytes)` gets a segment from the driver (its address).
  explicit CachingArena(absl::AnyInvocable<absl::StatusOr<uint64_t>(uint64_t)> allocate_segment);

  // The address of a block of at least `bytes`.
  absl::StatusOr<uint64_t> Allocate(uint64_t bytes);
  // Frees the block at `address` (returned by Allocate and not freed since).
  void Free(uint64_t address);

  // The segments (address, bytes), in the order they were made.
  const std::vector<std::pair<uint64_t, uint64_t>>& segments() const { return segments_; }
  uint64_t segment_bytes() const { return segment_bytes_; }
  uint64_t allocated_bytes() const { return allocated_bytes_; }  // in blocks handed out

  static uint64_t RoundSize(uint64_t bytes);
  static uint64_t SegmentSize(uint64_t rounded);

 private:
  struct Block {
    uint64_t size = 0;
    uint64_t segment_end = 0;
    bool free = false;
    bool small = false;
  };
  using FreeSet = std::set<std::pair<uint64_t, uint64_t>>;  // (size, address)

  FreeSet& Pool(bool small) { return small ? small_free_ : large_free_; }
  void MarkFree(uint64_t address, Block& block);

  absl::AnyInvocable<absl::StatusOr<uint64_t>(uint64_t)> allocate_segment_;
  std::map<uint64_t, Block> blocks_;  // by address; neighbours in a segment are adjacent
  FreeSet small_free_;
  FreeSet large_free_;
  std::vector<std::pair<uint64_t, uint64_t>> segments_;
  uint64_t segment_bytes_ = 0;
  uint64_t allocated_bytes_ = 0;
};

}  // namespace spillway::replay

#endif  // SPILLWAY_WORKLOADS_REPLAY_CACHING_ARENA_H_
