// The residency engine's overwrites: before a memset writes every byte of a range of managed
// memory, the whole 2 MiB chunks of that range that are not on the device hold data that is dead
// from then on. They are discarded on the memset's stream, so that the memset's page faults
// populate them on the device without copying the old contents in (see
// ResidencyEngine::OnOverwrite).
#include <utility>
#include <vector>

#include "policy/residency_engine.h"

namespace spillway::policy {

bool ResidencyEngine::NotOnDevice(const Allocation& allocation, uint64_t from, uint64_t to) const {
  auto off_device = [this](uint64_t id) {
    const auto it = tracked_.find(id);
    return it != tracked_.end() && !it->second.resident && !it->second.on_host;
  };
  if (arenas_.find(allocation.id) == arenas_.end()) return off_device(allocation.id);
  // An arena's chunks count from its base: [from, to) may fall in two of them.
  const uint64_t first = (from - allocation.base) / kArenaChunkBytes;
  const uint64_t last = (to - 1 - allocation.base) / kArenaChunkBytes;
  for (uint64_t c = first; c <= last; ++c) {
    if (!off_device(PieceId(allocation.id, c))) return false;
  }
  return true;
}

int ResidencyEngine::OnOverwrite(const Allocation& allocation, uint64_t address, uint64_t bytes,
                                 Stream stream) {
  if (allocation.backing != Backing::kManaged || bytes == 0) return 0;
  if (overwrite_unsupported_.load(std::memory_order_relaxed)) return 0;
  const uint64_t allocation_end = allocation.base + allocation.size;
  if (address < allocation.base || bytes > allocation_end - address) return 0;
  // The whole chunks (aligned as the device's) inside [address, address + bytes).
  const uint64_t from = (address + kArenaChunkBytes - 1) / kArenaChunkBytes * kArenaChunkBytes;
  const uint64_t to = (address + bytes) / kArenaChunkBytes * kArenaChunkBytes;
  if (from >= to) return 0;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [begin, end) to discard, merged
  {
    std::lock_guard lock(mutex_);
    if (!moves_) return 0;  // `none`: the device pages on demand, as without spillway
    for (uint64_t chunk = from; chunk < to; chunk += kArenaChunkBytes) {
      if (!NotOnDevice(allocation, chunk, chunk + kArenaChunkBytes)) continue;
      if (!ranges.empty() && ranges.back().second == chunk) {
        ranges.back().second += kArenaChunkBytes;
      } else {
        ranges.emplace_back(chunk, chunk + kArenaChunkBytes);
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
      // A driver without cuMemDiscardBatchAsync (before CUDA 13.0): not tried again, and not an
      // error of its own (OnFree's failed discard says it once). The memset copies the old
      // contents in, as without spillway.
      overwrite_unsupported_.store(true, std::memory_order_relaxed);
      return failures;
    }
    if (result != kDeviceOk) {
      ++failures;  // the old contents are copied in by the memset's faults, as without this
      continue;
    }
    overwrite_discard_bytes_.fetch_add(end - begin, std::memory_order_relaxed);
  }
  return failures;
}

}  // namespace spillway::policy
