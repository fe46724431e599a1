// Maps code addresses to (module, offset) for call-site stacks: the loaded ELF objects from
// dl_iterate_phdr, each with its GNU build-id (read from its PT_NOTE segment in memory) and path.
// A module keeps its index for the life of the map, so frames recorded earlier stay valid; the
// address ranges are rescanned when objects were loaded or unloaded since the last scan (dlopen,
// dlclose), which the loader's adds/subs counters tell on every lookup (a miss after a dlopen is
// therefore a rescan; an address in no object at all, e.g. JIT code, stays unknown).
// The project's one scan of loaded modules: call-site stacks (call_site_table.h) and the
// caller-module check of SPILLWAY_DEVICE_MODULES (interpose/caller_module.h) both use it.
#ifndef SPILLWAY_PROFILER_CALLSITE_MODULE_MAP_H_
#define SPILLWAY_PROFILER_CALLSITE_MODULE_MAP_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace spillway::callsite {

struct ModuleInfo {
  std::string build_id;  // lowercase hex; empty when the object has none
  std::string path;      // where it was loaded from (the executable's real path for the main one)
  uint64_t key = 0;      // a hash of the build-id (of the path when there is none): same every run
};

// Where an address lies: module index and offset from the module's load bias (the address the
// object's own ELF headers use, what addr2line takes).
struct Location {
  uint32_t module = 0;
  uint64_t offset = 0;
  uint64_t key = 0;  // the module's ModuleInfo::key; 0 for an address in no object
};

class ModuleMap {
  struct Range;

 public:
  static constexpr uint32_t kUnknownModule = 0xffffffffu;

  // The code ranges of the objects loaded at one moment. Immutable, so a caller may keep one and
  // look addresses up in it without the map's lock while the map moves on to newer snapshots.
  class Snapshot {
   public:
    // Where `address` lies: module kUnknownModule (key 0) and the raw address as offset when it
    // is in no object of this snapshot.
    Location Locate(uintptr_t address) const;
    // The indices of the modules loaded in this snapshot, ascending, each once.
    const std::vector<uint32_t>& modules() const { return modules_; }
    // The same snapshot with only the modules in `kept` (ascending): fewer ranges to search
    // when only some modules matter to a caller.
    Snapshot Only(const std::vector<uint32_t>& kept) const;

   private:
    friend class ModuleMap;
    unsigned long long adds_ = ~0ull;  // the loader's counters when it was scanned
    unsigned long long subs_ = ~0ull;
    std::vector<Range> ranges_;      // sorted by begin
    std::vector<uint32_t> modules_;  // sorted, unique
  };

  ModuleMap() = default;
  ModuleMap(const ModuleMap&) = delete;
  ModuleMap& operator=(const ModuleMap&) = delete;

  // The current snapshot: the last scan's, or a new scan's when objects were loaded or unloaded
  // since (the loader's counters moved). Thread-safe; never null.
  std::shared_ptr<const Snapshot> Current();

  // True when no object was loaded or unloaded since `snapshot` was scanned, i.e. it is still
  // what Current() would return. Cheaper than Current(): no lock. Thread-safe.
  static bool StillCurrent(const Snapshot& snapshot);

  // Resolves `count` addresses into `out` (same count) in the current snapshot. An address in no
  // loaded object gets module kUnknownModule and the raw address as offset. Thread-safe.
  void Resolve(void* const* pcs, int count, Location* out);

  // The module at `index`. REQUIRES: index was returned by Resolve and is not kUnknownModule.
  ModuleInfo Module(uint32_t index) const;

  // How many modules have an index so far.
  size_t ModuleCount() const;

  // Holds the map's lock across fork(); the child and the parent each release it after.
  void LockForFork();
  void UnlockAfterFork();

 private:
  struct Range {
    uintptr_t begin = 0;
    uintptr_t end = 0;
    uintptr_t bias = 0;
    uint32_t module = 0;
    uint64_t key = 0;
  };

  std::shared_ptr<const Snapshot> Rescan(unsigned long long adds, unsigned long long subs);

  mutable std::mutex mutex_;
  std::shared_ptr<const Snapshot> snapshot_;  // guarded by mutex_
  std::vector<ModuleInfo> modules_;           // guarded by mutex_; indices never change
  // (path, bias) of each indexed module, to find it again on a rescan; guarded by mutex_.
  std::vector<std::pair<std::string, uintptr_t>> identities_;
};

// Inline: the caller-module check looks up every frame of every allocation's stack.
inline Location ModuleMap::Snapshot::Locate(uintptr_t address) const {
  const auto after =
      std::upper_bound(ranges_.begin(), ranges_.end(), address,
                       [](uintptr_t value, const Range& range) { return value < range.begin; });
  if (after != ranges_.begin()) {
    const Range& range = *(after - 1);
    if (address < range.end) return Location{range.module, address - range.bias, range.key};
  }
  return Location{kUnknownModule, address, 0};
}

// FNV-1a over `size` bytes, continuing from `seed`.
uint64_t HashBytes(const void* data, size_t size, uint64_t seed = 0xcbf29ce484222325ull);

// Mixes one 64-bit word into `hash` (a word at a time, for call-site frames).
inline uint64_t HashWord(uint64_t hash, uint64_t word) {
  hash ^= word + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
  hash ^= hash >> 31;
  hash *= 0xbf58476d1ce4e5b9ull;
  return hash ^ (hash >> 29);
}

}  // namespace spillway::callsite

#endif  // SPILLWAY_PROFILER_CALLSITE_MODULE_MAP_H_
