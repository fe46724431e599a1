// The residency engine's planned moves and the order waits between them: shared by the engine's
// source files, not part of its interface (see residency_engine.h).
#ifndef SPILLWAY_POLICY_ENGINE_RESIDENCY_ENGINE_MOVES_H_
#define SPILLWAY_POLICY_ENGINE_RESIDENCY_ENGINE_MOVES_H_

#include <cstddef>
#include <cstdint>

#include "policy/engine/device.h"

namespace spillway::policy {

// A migration the engine decided on, issued once its lock is released.
struct PlannedMove {
  bool to_device;
  uint64_t id;  // the allocation's, to tell a failed move from one whose allocation was freed
  uint64_t base;
  uint64_t size;
  uint64_t seq = 0;  // an eviction: the order event recorded after it (0: none)
};

// An order event a stream waits for before a move (the `before`-th of the moves issued there).
struct OrderWait {
  size_t before;
  uint64_t seq;
};

// An order event recorded on `stream` (a victim's last use there), that the evicting stream then
// waits for before its evictions.
struct LastUse {
  Stream stream;
  uint64_t seq;
};

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_ENGINE_RESIDENCY_ENGINE_MOVES_H_
