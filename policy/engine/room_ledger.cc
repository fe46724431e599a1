// RoomLedger: freed device room in the order it was freed, each with its event.
#include "policy/engine/room_ledger.h"

#include <algorithm>

namespace spillway::policy {

void RoomLedger::Add(uint64_t seq, Stream stream, uint64_t bytes) {
  if (bytes == 0) return;
  bytes_ += bytes;
  if (!rooms_.empty() && rooms_.back().seq == seq) {
    rooms_.back().bytes += bytes;  // more room after the same event
    return;
  }
  rooms_.push_back(Room{seq, stream, bytes});
}

void RoomLedger::Trim(uint64_t newest_seq, uint64_t max_age, uint64_t free_bytes) {
  while (!rooms_.empty() && (newest_seq - rooms_.front().seq >= max_age ||
                             bytes_ - rooms_.front().bytes >= free_bytes)) {
    bytes_ -= rooms_.front().bytes;
    rooms_.pop_front();
  }
  if (bytes_ > free_bytes) {  // the oldest room is only partly free still
    rooms_.front().bytes -= bytes_ - free_bytes;
    bytes_ = free_bytes;
  }
}

void RoomLedger::Take(uint64_t bytes, uint64_t unledgered, std::vector<Room>* taken) {
  bytes -= std::min(bytes, unledgered);
  while (bytes != 0 && !rooms_.empty()) {
    Room& room = rooms_.front();
    const uint64_t part = std::min(bytes, room.bytes);
    taken->push_back(Room{room.seq, room.stream, part});
    bytes -= part;
    bytes_ -= part;
    room.bytes -= part;
    if (room.bytes == 0) rooms_.pop_front();
  }
}

}  // namespace spillway::policy
