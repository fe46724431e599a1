// ListedCallerModule: which loaded modules are listed, from the process's one module map
// (profiler/callsite/module_map.h: the dl_iterate_phdr scan, its refresh after dlopen/dlclose and
// the address lookup); frames from libunwind's unw_backtrace (profiler/callsite/unwinder.h, loaded
// privately) when it loaded, else glibc's backtrace() (about 20 times slower, docs/benchmarks.md).
#include "interpose/caller_module.h"

#include <execinfo.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

#include "profiler/callsite/module_map.h"
#include "profiler/callsite/unwinder.h"

namespace spillway::interpose {
namespace {

using callsite::ModuleMap;

ModuleMap& Modules() {
  static ModuleMap* map = new ModuleMap;  // never freed: used from exit paths too
  return *map;
}

// The loaded modules that match one list, in one snapshot of the module map.
struct Listed {
  std::shared_ptr<const ModuleMap::Snapshot> snapshot;  // what `only` was taken from
  std::vector<std::string> parts;
  ModuleMap::Snapshot only;                               // the snapshot less unlisted modules
  std::vector<std::pair<uint32_t, std::string>> modules;  // module index and path
};

// The last list's matches. The loader lock (taken by the module map's scan and by backtrace) is
// never taken while `mutex` is held.
struct ListedCache {
  std::mutex mutex;
  std::shared_ptr<const Listed> last;  // guarded by mutex
};

ListedCache& Cache() {
  static ListedCache* cache = new ListedCache;  // never freed: used from exit paths too
  return *cache;
}

// The loaded modules matching `parts`, recomputed when the map has a new snapshot (objects came
// or went) or the list changed.
std::shared_ptr<const Listed> ListedFor(const std::vector<std::string>& parts) {
  ListedCache& cache = Cache();
  std::shared_ptr<const Listed> last;
  {
    std::lock_guard lock(cache.mutex);
    if (cache.last != nullptr && cache.last->parts == parts) last = cache.last;
  }
  if (last != nullptr && ModuleMap::StillCurrent(*last->snapshot)) return last;
  std::shared_ptr<const ModuleMap::Snapshot> snapshot = Modules().Current();
  auto listed = std::make_shared<Listed>();
  std::vector<uint32_t> kept;
  for (const uint32_t index : snapshot->modules()) {
    std::string path = Modules().Module(index).path;
    if (!ModuleListed(path, parts)) continue;
    kept.push_back(index);
    listed->modules.emplace_back(index, std::move(path));
  }
  listed->only = snapshot->Only(kept);
  listed->snapshot = std::move(snapshot);
  listed->parts = parts;
  std::lock_guard lock(cache.mutex);
  cache.last = listed;
  return listed;
}

}  // namespace

bool PrepareCallerWalk() { return callsite::UnwinderAvailable(); }

bool ModuleListed(std::string_view path, const std::vector<std::string>& parts) {
  // The file name only: the folders (/usr/lib/x86_64-linux-gnu, a version's directory) would
  // match parts never meant for them.
  const size_t slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  for (const std::string& part : parts) {
    if (!part.empty() && name.find(part) != std::string_view::npos) return true;
  }
  return false;
}

std::optional<std::string> ListedCallerModule(const std::vector<std::string>& parts) {
  if (parts.empty()) return std::nullopt;
  const std::shared_ptr<const Listed> listed = ListedFor(parts);
  if (listed->modules.empty()) return std::nullopt;
  void* frames[kCallerFrames + 1];
  int count = callsite::Backtrace(frames, kCallerFrames + 1);  // 0 without libunwind
  if (count == 0) count = backtrace(frames, kCallerFrames + 1);
  for (int i = 1; i < count; ++i) {  // frame 0 is this function
    const uint32_t module = listed->only.Locate(reinterpret_cast<uintptr_t>(frames[i])).module;
    if (module == ModuleMap::kUnknownModule) continue;
    for (const auto& [index, path] : listed->modules) {
      if (index == module) return path;
    }
  }
  return std::nullopt;
}

}  // namespace spillway::interpose
