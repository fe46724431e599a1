// The residency engine's ledger of freed device room: bytes the engine counts as free because it
// issued a discard or an eviction, in the order they were freed, each with the event recorded on
// the freeing stream after that work. Such room is free on the device only once the event has
// completed, so a move that takes it must first wait (cuStreamWaitEvent) for exactly that event.
// Used by the learned lookahead (policy/engine/residency_engine.cc) and by planned schedules
// (policy/engine/schedule_executor.cc). Not thread-safe: the engine holds its lock.
#ifndef SPILLWAY_POLICY_ENGINE_ROOM_LEDGER_H_
#define SPILLWAY_POLICY_ENGINE_ROOM_LEDGER_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "policy/engine/device.h"

namespace spillway::policy {

class RoomLedger {
 public:
  struct Room {
    uint64_t seq = 0;         // the engine's event after the freeing work (its ring position)
    Stream stream = nullptr;  // where that event is recorded
    uint64_t bytes = 0;
  };

  // @brief `bytes` become free once event `seq`, recorded on `stream`, completes. REQUIRES: `seq`
  // newer than every seq added before.
  void Add(uint64_t seq, Stream stream, uint64_t bytes);
  // @brief Forgets the room whose event is `max_age` or more events older than `newest_seq` (long
  // complete, and its event may be recorded again), and, oldest first, the room beyond
  // `free_bytes` (taken meanwhile by what the ledger does not see, e.g. plain device memory).
  void Trim(uint64_t newest_seq, uint64_t max_age, uint64_t free_bytes);
  // @brief Takes `bytes` of room: first up to `unledgered` bytes that are free already (room the
  // ledger does not hold), then the ledger's room, oldest first. Appends to `taken` the rooms it
  // takes from (so the caller waits for their events); what the ledger cannot cover is left.
  void Take(uint64_t bytes, uint64_t unledgered, std::vector<Room>* taken);
  // @brief The bytes the ledger holds.
  uint64_t bytes() const { return bytes_; }
  bool empty() const { return rooms_.empty(); }

 private:
  std::deque<Room> rooms_;  // oldest first
  uint64_t bytes_ = 0;
};

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_ENGINE_ROOM_LEDGER_H_
