// Partial residency of a tracked allocation (policy/engine/tracked_allocation.h): the engine's
// count of what is on the device stays exact when a schedule moves only some chunks of an
// allocation, so the engine's own moves after following ends do not overfill the device.
#include "policy/engine/tracked_allocation.h"

#include <algorithm>

#include "common/cost_model.h"

namespace spillway::policy {

namespace {

// The footprint of chunk `c` (address / kChunkBytes) of `t`: the granules of `t` in it. Granules
// divide a chunk, so the chunks' footprints add up to the allocation's.
uint64_t ChunkFootprint(const TrackedAllocation& t, uint64_t c, uint64_t granule) {
  const uint64_t begin = std::max(t.base, c * kChunkBytes);
  const uint64_t end = std::min(t.base + t.size, (c + 1) * kChunkBytes);
  return GranuleFootprint(begin, end - begin, granule);
}

}  // namespace

bool AnyOnDevice(const TrackedAllocation& t, uint64_t address, uint64_t bytes) {
  if (t.resident || t.part_in == 0 || bytes == 0) return t.resident;
  for (uint64_t c = address / kChunkBytes; c <= (address + bytes - 1) / kChunkBytes; ++c) {
    if (!std::binary_search(t.absent_chunks.begin(), t.absent_chunks.end(), c)) return true;
  }
  return false;
}

void MarkResident(TrackedAllocation* t, uint64_t* resident_bytes) {
  *resident_bytes += Missing(*t);
  t->resident = true;
  t->part_in = 0;
  t->absent_chunks.clear();
}

uint64_t MarkAbsent(TrackedAllocation* t, uint64_t* resident_bytes) {
  const uint64_t freed = OnDevice(*t);
  *resident_bytes -= freed;
  t->resident = false;
  t->part_in = 0;
  t->absent_chunks.clear();
  return freed;
}

void MovePart(TrackedAllocation* t, uint64_t address, uint64_t bytes, bool in, uint64_t granule,
              uint64_t* resident_bytes) {
  if (t->size == 0 || bytes == 0) return;
  const uint64_t end = t->base + t->size;
  const uint64_t lo = std::max(address, t->base), hi = std::min(address + bytes, end);
  if (lo >= hi) return;
  const uint64_t first = t->base / kChunkBytes, last = (end - 1) / kChunkBytes;
  // The chunks moved. One coming in counts when any of it does, one leaving only when all of the
  // allocation's bytes in it do (a schedule's chunks count from the allocation's start, which
  // need not be 2 MiB-aligned): the count errs high, never low.
  uint64_t from = lo / kChunkBytes, to = (hi - 1) / kChunkBytes;
  if (!in) {
    if (lo != t->base && lo % kChunkBytes != 0) ++from;
    if (hi != end && hi % kChunkBytes != 0) {
      if (to == 0) return;
      --to;
    }
  }
  if (from > to) return;
  if (from == first && to == last) {
    if (in) {
      MarkResident(t, resident_bytes);
    } else {
      MarkAbsent(t, resident_bytes);
    }
    return;
  }
  // Whole on one side so far: spelled out as chunks, then moved.
  if (t->resident) {
    if (in) return;
    t->resident = false;
    t->part_in = t->footprint;
  } else if (t->part_in == 0 && t->absent_chunks.empty()) {
    if (!in) return;
    for (uint64_t c = first; c <= last; ++c) t->absent_chunks.push_back(c);
  }
  std::vector<uint64_t>& absent = t->absent_chunks;
  for (uint64_t c = from; c <= to; ++c) {
    const auto it = std::lower_bound(absent.begin(), absent.end(), c);
    const bool gone = it != absent.end() && *it == c;
    if (in == !gone) continue;  // already where it goes
    const uint64_t footprint = ChunkFootprint(*t, c, granule);
    if (in) {
      absent.erase(it);
      t->part_in += footprint;
      *resident_bytes += footprint;
    } else {
      absent.insert(it, c);
      t->part_in -= footprint;
      *resident_bytes -= footprint;
    }
  }
  if (absent.empty()) {  // every chunk back
    t->resident = true;
    t->part_in = 0;
  } else if (absent.size() == last - first + 1) {  // every chunk gone
    t->part_in = 0;
    absent.clear();
  }
}

}  // namespace spillway::policy
