// The bytes of one replayed tensor that some op has written, as disjoint ranges. The replayer
// reads only bytes it wrote before (a byte a recorded op reads before any op wrote it is written
// by that op instead: its content would be whatever the memory held, which differs between runs
// with and without spillway), so every check is the same in every run.
#ifndef SPILLWAY_WORKLOADS_REPLAY_WRITTEN_RANGES_H_
#define SPILLWAY_WORKLOADS_REPLAY_WRITTEN_RANGES_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"

namespace spillway::replay {

class WrittenRanges {
 public:
  // Marks [begin, end) written.
  void Add(uint64_t begin, uint64_t end);
  // Calls `piece(b, e, written)` for consecutive pieces covering [begin, end) in order, each
  // wholly written or wholly not.
  void Split(uint64_t begin, uint64_t end,
             absl::FunctionRef<void(uint64_t, uint64_t, bool)> piece) const;
  // The written ranges, in order.
  const std::vector<std::pair<uint64_t, uint64_t>>& ranges() const { return ranges_; }

 private:
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;  // disjoint, not touching, sorted
};

}  // namespace spillway::replay

#endif  // SPILLWAY_WORKLOADS_REPLAY_WRITTEN_RANGES_H_
