// CachingArena (caching_arena.h): blocks by address, free blocks per pool ordered by (size,
// address) for the best fit.
#include "workloads/replay/caching_arena.h"

#include <iterator>

namespace spillway::replay {

CachingArena::CachingArena(absl::AnyInvocable<absl::StatusOr<uint64_t>(uint64_t)> allocate_segment)
    : allocate_segment_(std::move(allocate_segment)) {}

uint64_t CachingArena::RoundSize(uint64_t bytes) {
  if (bytes < kMinBlock) return kMinBlock;
  return (bytes + kMinBlock - 1) / kMinBlock * kMinBlock;
}

uint64_t CachingArena::SegmentSize(uint64_t rounded) {
  if (rounded <= kSmallSize) return kSmallSegment;
  if (rounded < kMinLargeAlloc) return kLargeSegment;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

absl::StatusOr<uint64_t> CachingArena::Allocate(uint64_t bytes) {
  const uint64_t size = RoundSize(bytes);
  const bool small = size <= kSmallSize;
  FreeSet& pool = Pool(small);
  uint64_t address = 0;
  const auto fit = pool.lower_bound({size, 0});
  if (fit != pool.end()) {
    address = fit->second;
    pool.erase(fit);
  } else {
    const uint64_t segment = SegmentSize(size);
    absl::StatusOr<uint64_t> made = allocate_segment_(segment);
    if (!made.ok()) return made.status();
    address = *made;
    segments_.push_back({address, segment});
    segment_bytes_ += segment;
    blocks_[address] = {segment, address + segment, false, small};
  }
  Block& block = blocks_[address];
  block.free = false;
  const uint64_t remaining = block.size - size;
  if (small ? remaining >= kMinBlock : remaining > kSmallSize) {
    block.size = size;
    Block& rest = blocks_[address + size];
    rest = {remaining, block.segment_end, false, small};
    MarkFree(address + size, rest);
  }
  allocated_bytes_ += blocks_[address].size;
  return address;
}

void CachingArena::Free(uint64_t address) {
  auto it = blocks_.find(address);
  if (it == blocks_.end() || it->second.free) return;
  allocated_bytes_ -= it->second.size;
  // Join the free neighbours of the same segment.
  if (it != blocks_.begin()) {
    auto before = std::prev(it);
    if (before->second.free && before->first + before->second.size == it->first &&
        before->second.segment_end == it->second.segment_end) {
      Pool(before->second.small).erase({before->second.size, before->first});
      before->second.size += it->second.size;
      blocks_.erase(it);
      it = before;
    }
  }
  auto after = std::next(it);
  if (after != blocks_.end() && after->second.free && it->first + it->second.size == after->first &&
      after->second.segment_end == it->second.segment_end) {
    Pool(after->second.small).erase({after->second.size, after->first});
    it->second.size += after->second.size;
    blocks_.erase(after);
  }
  MarkFree(it->first, it->second);
}

void CachingArena::MarkFree(uint64_t address, Block& block) {
  block.free = true;
  Pool(block.small).insert({block.size, address});
}

}  // namespace spillway::replay
