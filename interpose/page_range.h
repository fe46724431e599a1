// The whole pages of a byte range. A discard names only those. A stream-ordered pool packs
// allocations at 512 B, so a freed one can share its first and last page with live ones; the
// driver documents that bytes outside a discarded range keep their values, but not how it treats
// a range that starts or ends inside a page (nvidia-uvm's ioctls take page-aligned ranges): it
// may round in, refuse the range, or, against its word, round out. Whole pages are safe in every
// case, and a partial page is only left to be copied if it is evicted.
#ifndef SPILLWAY_INTERPOSE_PAGE_RANGE_H_
#define SPILLWAY_INTERPOSE_PAGE_RANGE_H_

#include <cstdint>

namespace spillway::interpose {

struct PageRange {
  uint64_t begin = 0;
  uint64_t end = 0;  // begin == end: no whole page
  uint64_t bytes() const { return end - begin; }
};

// The whole `page`-sized pages (page: a power of two) inside [address, address + bytes).
constexpr PageRange InnerPages(uint64_t address, uint64_t bytes, uint64_t page) {
  const uint64_t begin = (address + page - 1) & ~(page - 1);
  const uint64_t end = (address + bytes) & ~(page - 1);
  if (begin < address || end <= begin) return PageRange{begin, begin};  // none (or wrapped)
  return PageRange{begin, end};
}

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_PAGE_RANGE_H_
