// WrittenRanges (written_ranges.h): a sorted vector of disjoint ranges; a tensor is usually
// written whole by one op, so it holds one range.
#include "workloads/replay/written_ranges.h"

#include <algorithm>

namespace spillway::replay {

void WrittenRanges::Add(uint64_t begin, uint64_t end) {
  if (begin >= end) return;
  // The first range that ends at or after `begin` (touching ranges are joined).
  auto first = std::lower_bound(ranges_.begin(), ranges_.end(), begin,
                                [](const auto& range, uint64_t at) { return range.second < at; });
  auto last = first;
  while (last != ranges_.end() && last->first <= end) {
    begin = std::min(begin, last->first);
    end = std::max(end, last->second);
    ++last;
  }
  first = ranges_.erase(first, last);
  ranges_.insert(first, {begin, end});
}

void WrittenRanges::Split(uint64_t begin, uint64_t end,
                          absl::FunctionRef<void(uint64_t, uint64_t, bool)> piece) const {
  auto range = std::lower_bound(ranges_.begin(), ranges_.end(), begin,
                                [](const auto& r, uint64_t at) { return r.second <= at; });
  uint64_t at = begin;
  while (at < end) {
    if (range == ranges_.end() || range->first >= end) {
      piece(at, end, false);
      return;
    }
    if (range->first > at) {
      piece(at, range->first, false);
      at = range->first;
    }
    const uint64_t stop = std::min(end, range->second);
    piece(at, stop, true);
    at = stop;
    ++range;
  }
}

}  // namespace spillway::replay
