// The residency engine's overwrites: before a memset writes every byte of a range of managed
// memory, the whole 2 MiB chunks of that range that are not on the device hold data that is dead
// from then on. They are discarded on the memset's stream; then what the engine tracks and the
// memset would fault in is brought onto the device there as for a launch (room made by eviction),
// the discarded chunks zero-filled, so the memset faults nothing in behind the engine's back (see
// ResidencyEngine::OnOverwrite).
#include <algorithm>
#include <utility>
#include <vector>

#include "policy/engine/residency_engine.h"
#include "policy/engine/residency_engine_moves.h"

namespace spillway::policy {

int ResidencyEngine::OnOverwrite(const Allocation& allocation, uint64_t address, uint64_t bytes,
                                 Stream stream) {
  if (allocation.backing != Backing::kManaged || bytes == 0) return 0;
  const uint64_t allocation_end = allocation.base + allocation.size;
  if (address < allocation.base || bytes > allocation_end - address) return 0;
  // The whole chunks (aligned as the device's) inside [address, address + bytes): none when
  // from >= to.
  const uint64_t from = (address + kArenaChunkBytes - 1) / kArenaChunkBytes * kArenaChunkBytes;
  const uint64_t to = (address + bytes) / kArenaChunkBytes * kArenaChunkBytes;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [begin, end) to discard, merged
  std::vector<PlannedMove> moves;
  std::vector<LastUse> last_uses;
  std::vector<OrderWait> waits;
  {
    std::lock_guard lock(mutex_);
    if (!moves_) return 0;  // `none`: the device pages on demand, as without spillway
    const bool discards = !overwrite_unsupported_.load(std::memory_order_relaxed);
    for (uint64_t chunk = from; discards && chunk < to; chunk += kArenaChunkBytes) {
      // Dead when the engine tracks it and has none of it on the device (an arena's chunks count
      // from its base, so two of them may share a device chunk).
      bool tracked = false, off_device = true;
      const auto dead = [&](Tracked& entry, uint64_t) {
        tracked = true;
        off_device = off_device && OnDevice(entry) == 0 && !entry.on_host;
      };
      arenas_.ForEachTouched(allocation, chunk, chunk + kArenaChunkBytes, tracked_, dead);
      if (!tracked || !off_device) continue;
      if (!ranges.empty() && ranges.back().second == chunk) {
        ranges.back().second += kArenaChunkBytes;
      } else {
        ranges.emplace_back(chunk, chunk + kArenaChunkBytes);
      }
    }
    // What the memset would fault in comes in now, on its stream, after room made for it (a
    // schedule being followed plans its own residency: not then).
    if (!schedule_.active()) {
      std::vector<uint64_t> ids, touched;
      uint64_t needed = 0;
      // The device chunks the memset touches: [first, end).
      const uint64_t first = address / kArenaChunkBytes * kArenaChunkBytes;
      const uint64_t end =
          (address + bytes + kArenaChunkBytes - 1) / kArenaChunkBytes * kArenaChunkBytes;
      const auto touch = [&](Tracked& entry, uint64_t id) {
        // Used by the memset, on `stream`: not a victim of the room made for it, and an eviction
        // elsewhere later waits for `stream`.
        entry.launched = true;
        entry.last_stream = stream;
        policy_->Touch(id);
        touched.push_back(id);
        // Brought in when off the device and the memset touches every chunk of it (it would fault
        // it in whole).
        if (entry.resident || entry.on_host) return;
        if (entry.base / kArenaChunkBytes * kArenaChunkBytes < first ||
            (entry.base + entry.size + kArenaChunkBytes - 1) / kArenaChunkBytes * kArenaChunkBytes >
                end) {
          return;
        }
        ids.push_back(id);
        needed += Missing(entry);
      };
      arenas_.ForEachTouched(allocation, address, address + bytes, tracked_, touch);
      std::sort(touched.begin(), touched.end());
      if (!ids.empty()) {
        PlanOwnMoves(ids, needed, launch_stamp_, stream, &moves, &last_uses, &waits, &touched);
      }
    }
  }
  // Outside the lock. Another thread may plan a prefetch of these chunks meanwhile, on another
  // stream: whatever order the two run in, the memset after the discard on `stream` writes every
  // byte of them.
  int failures = 0;
  for (const auto& [begin, end] : ranges) {
    const DeviceResult result = device_->Discard(begin, end - begin, stream);
    if (result == kDeviceNotSupported) {
      // A driver without cuMemDiscardBatchAsync (before CUDA 13.0): not tried again, and no
      // error (the device says it once). The memset copies the old contents in, as without
      // spillway.
      overwrite_unsupported_.store(true, std::memory_order_relaxed);
      break;
    }
    if (result != kDeviceOk) {
      ++failures;  // the old contents are copied in by the memset's faults, as without this
      continue;
    }
    overwrite_discard_bytes_.fetch_add(end - begin, std::memory_order_relaxed);
  }
  // After the discards: a prefetch of a discarded chunk copies nothing.
  failures += Issue(moves, stream, false, last_uses, waits);
  return failures;
}

}  // namespace spillway::policy
