// ListedCallerModule: code ranges of listed modules from dl_iterate_phdr; frames from libunwind's
// unw_backtrace (profiler/callsite/unwinder.h, loaded privately) when it loaded, else glibc's
// backtrace() (about 20 times slower, docs/benchmarks.md).
#include "interpose/caller_module.h"

#include <execinfo.h>
#include <link.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "profiler/callsite/unwinder.h"

namespace spillway::interpose {
namespace {

struct Range {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  std::string path;
};

using Ranges = std::vector<Range>;

// The last scan's result. Driver-free and lock-free while scanning: the loader lock is taken by
// dl_iterate_phdr and backtrace, never while `mutex` is held.
struct ListedRanges {
  std::mutex mutex;
  unsigned long long adds = ~0ull;  // loader counters when `ranges` was computed; guarded by mutex
  unsigned long long subs = ~0ull;
  std::vector<std::string> parts;        // the list `ranges` was computed for; guarded by mutex
  std::shared_ptr<const Ranges> ranges;  // guarded by mutex
};

ListedRanges& Cache() {
  static ListedRanges* cache = new ListedRanges;  // never freed: used from exit paths too
  return *cache;
}

struct Scan {
  const std::vector<std::string>* parts = nullptr;
  unsigned long long known_adds = ~0ull;
  unsigned long long known_subs = ~0ull;
  unsigned long long adds = ~0ull;
  unsigned long long subs = ~0ull;
  bool first = true;
  bool unchanged = false;
  Ranges ranges;
};

int CollectRanges(dl_phdr_info* info, size_t size, void* data) {
  auto* scan = static_cast<Scan*>(data);
  if (scan->first) {
    scan->first = false;
    if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
      scan->adds = info->dlpi_adds;
      scan->subs = info->dlpi_subs;
      if (scan->adds == scan->known_adds && scan->subs == scan->known_subs) {
        scan->unchanged = true;
        return 1;  // stop: nothing was loaded or unloaded since the last scan
      }
    }
  }
  const char* name = info->dlpi_name;
  if (name == nullptr || name[0] == '\0' || !ModuleListed(name, *scan->parts)) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& header = info->dlpi_phdr[i];
    if (header.p_type != PT_LOAD || (header.p_flags & PF_X) == 0) continue;
    const uintptr_t begin = info->dlpi_addr + header.p_vaddr;
    scan->ranges.push_back(Range{begin, begin + header.p_memsz, name});
  }
  return 0;
}

// The code ranges of the loaded modules matching `parts`, rescanned when objects came or went.
std::shared_ptr<const Ranges> ListedRangesFor(const std::vector<std::string>& parts) {
  ListedRanges& cache = Cache();
  Scan scan;
  scan.parts = &parts;
  scan.known_adds = scan.known_subs = ~0ull;
  {
    std::lock_guard lock(cache.mutex);
    if (cache.parts == parts && cache.ranges != nullptr) {
      scan.known_adds = cache.adds;
      scan.known_subs = cache.subs;
    }
  }
  dl_iterate_phdr(CollectRanges, &scan);
  std::lock_guard lock(cache.mutex);
  if (scan.unchanged && cache.ranges != nullptr) return cache.ranges;
  cache.parts = parts;
  cache.adds = scan.adds;
  cache.subs = scan.subs;
  cache.ranges = std::make_shared<const Ranges>(std::move(scan.ranges));
  return cache.ranges;
}

}  // namespace

bool PrepareCallerWalk() { return callsite::UnwinderAvailable(); }

bool ModuleListed(std::string_view path, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) {
    if (!part.empty() && path.find(part) != std::string_view::npos) return true;
  }
  return false;
}

std::optional<std::string> ListedCallerModule(const std::vector<std::string>& parts) {
  if (parts.empty()) return std::nullopt;
  const std::shared_ptr<const Ranges> ranges = ListedRangesFor(parts);
  if (ranges->empty()) return std::nullopt;
  void* frames[kCallerFrames + 1];
  int count = callsite::Backtrace(frames, kCallerFrames + 1);  // 0 without libunwind
  if (count == 0) count = backtrace(frames, kCallerFrames + 1);
  for (int i = 1; i < count; ++i) {  // frame 0 is this function
    const auto address = reinterpret_cast<uintptr_t>(frames[i]);
    for (const Range& range : *ranges) {
      if (address >= range.begin && address < range.end) return range.path;
    }
  }
  return std::nullopt;
}

}  // namespace spillway::interpose
