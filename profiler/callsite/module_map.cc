// ModuleMap: dl_iterate_phdr scans, build-id notes read from memory, binary search per address.
#include "profiler/callsite/module_map.h"

#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace spillway::callsite {
namespace {

constexpr char kHex[] = "0123456789abcdef";

// The GNU build-id in the object's PT_NOTE segments, as hex; empty when none.
std::string BuildIdOf(const dl_phdr_info& info) {
  for (int i = 0; i < info.dlpi_phnum; ++i) {
    const ElfW(Phdr)& header = info.dlpi_phdr[i];
    if (header.p_type != PT_NOTE) continue;
    const auto* note = reinterpret_cast<const unsigned char*>(info.dlpi_addr + header.p_vaddr);
    size_t left = header.p_memsz;
    while (left >= sizeof(ElfW(Nhdr))) {
      ElfW(Nhdr) nhdr;
      std::memcpy(&nhdr, note, sizeof(nhdr));
      const size_t name_size = (nhdr.n_namesz + 3u) & ~size_t{3};
      const size_t desc_size = (nhdr.n_descsz + 3u) & ~size_t{3};
      const size_t total = sizeof(nhdr) + name_size + desc_size;
      if (total > left) break;
      const unsigned char* name = note + sizeof(nhdr);
      if (nhdr.n_type == NT_GNU_BUILD_ID && nhdr.n_namesz == 4 &&
          std::memcmp(name, "GNU", 4) == 0) {
        const unsigned char* desc = name + name_size;
        std::string hex;
        hex.reserve(nhdr.n_descsz * 2);
        for (size_t b = 0; b < nhdr.n_descsz; ++b) {
          hex.push_back(kHex[desc[b] >> 4]);
          hex.push_back(kHex[desc[b] & 15]);
        }
        return hex;
      }
      note += total;
      left -= total;
    }
  }
  return {};
}

std::string ExecutablePath() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : std::string("(main)");
}

struct ScanState {
  unsigned long long adds = ~0ull;
  unsigned long long subs = ~0ull;
  struct Object {
    std::string path;
    std::string build_id;
    uintptr_t bias = 0;
    std::vector<std::pair<uintptr_t, uintptr_t>> code;  // [begin, end) of executable segments
  };
  std::vector<Object> objects;
};

int ReadCounters(dl_phdr_info* info, size_t size, void* data) {
  auto* state = static_cast<ScanState*>(data);
  if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
    state->adds = info->dlpi_adds;
    state->subs = info->dlpi_subs;
  }
  return 1;  // the counters are the same in every entry: stop after the first
}

int CollectObjects(dl_phdr_info* info, size_t size, void* data) {
  auto* state = static_cast<ScanState*>(data);
  if (state->objects.empty() &&
      size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
    state->adds = info->dlpi_adds;
    state->subs = info->dlpi_subs;
  }
  ScanState::Object object;
  object.path = info->dlpi_name != nullptr ? info->dlpi_name : "";
  object.bias = info->dlpi_addr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& header = info->dlpi_phdr[i];
    if (header.p_type != PT_LOAD || (header.p_flags & PF_X) == 0) continue;
    const uintptr_t begin = info->dlpi_addr + header.p_vaddr;
    object.code.emplace_back(begin, begin + header.p_memsz);
  }
  if (object.code.empty()) return 0;
  object.build_id = BuildIdOf(*info);
  state->objects.push_back(std::move(object));
  return 0;
}

}  // namespace

uint64_t HashBytes(const void* data, size_t size, uint64_t seed) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t hash = seed;
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::shared_ptr<const ModuleMap::Snapshot> ModuleMap::Rescan(unsigned long long adds,
                                                             unsigned long long subs) {
  ScanState state;
  dl_iterate_phdr(CollectObjects, &state);  // outside mutex_: the loader lock is taken here
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->adds_ = state.objects.empty() ? adds : state.adds;
  snapshot->subs_ = state.objects.empty() ? subs : state.subs;
  std::lock_guard lock(mutex_);
  for (ScanState::Object& object : state.objects) {
    if (object.path.empty()) object.path = ExecutablePath();
    uint32_t index = 0;
    while (index < identities_.size() &&
           (identities_[index].second != object.bias || identities_[index].first != object.path ||
            modules_[index].build_id != object.build_id)) {
      ++index;
    }
    if (index == identities_.size()) {
      ModuleInfo info;
      info.key = object.build_id.empty()
                     ? HashBytes(object.path.data(), object.path.size())
                     : HashBytes(object.build_id.data(), object.build_id.size());
      info.build_id = std::move(object.build_id);
      info.path = object.path;
      modules_.push_back(std::move(info));
      identities_.emplace_back(std::move(object.path), object.bias);
    }
    for (const auto& [begin, end] : object.code) {
      snapshot->ranges_.push_back(Range{begin, end, object.bias, index, modules_[index].key});
    }
    snapshot->modules_.push_back(index);
  }
  std::sort(snapshot->ranges_.begin(), snapshot->ranges_.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  std::sort(snapshot->modules_.begin(), snapshot->modules_.end());
  snapshot->modules_.erase(std::unique(snapshot->modules_.begin(), snapshot->modules_.end()),
                           snapshot->modules_.end());
  snapshot_ = snapshot;
  return snapshot;
}

std::shared_ptr<const ModuleMap::Snapshot> ModuleMap::Current() {
  ScanState counters;
  dl_iterate_phdr(ReadCounters, &counters);
  {
    std::lock_guard lock(mutex_);
    if (snapshot_ != nullptr && snapshot_->adds_ == counters.adds &&
        snapshot_->subs_ == counters.subs) {
      return snapshot_;
    }
  }
  return Rescan(counters.adds, counters.subs);
}

bool ModuleMap::StillCurrent(const Snapshot& snapshot) {
  ScanState counters;
  dl_iterate_phdr(ReadCounters, &counters);
  return snapshot.adds_ == counters.adds && snapshot.subs_ == counters.subs;
}

ModuleMap::Snapshot ModuleMap::Snapshot::Only(const std::vector<uint32_t>& kept) const {
  Snapshot only;
  only.adds_ = adds_;
  only.subs_ = subs_;
  const auto is_kept = [&kept](uint32_t module) {
    return std::binary_search(kept.begin(), kept.end(), module);
  };
  for (const Range& range : ranges_) {
    if (is_kept(range.module)) only.ranges_.push_back(range);
  }
  for (const uint32_t module : modules_) {
    if (is_kept(module)) only.modules_.push_back(module);
  }
  return only;
}

void ModuleMap::Resolve(void* const* pcs, int count, Location* out) {
  const std::shared_ptr<const Snapshot> snapshot = Current();
  for (int i = 0; i < count; ++i) out[i] = snapshot->Locate(reinterpret_cast<uintptr_t>(pcs[i]));
}

ModuleInfo ModuleMap::Module(uint32_t index) const {
  std::lock_guard lock(mutex_);
  return modules_[index];
}

size_t ModuleMap::ModuleCount() const {
  std::lock_guard lock(mutex_);
  return modules_.size();
}

void ModuleMap::LockForFork() { mutex_.lock(); }

void ModuleMap::UnlockAfterFork() { mutex_.unlock(); }

}  // namespace spillway::callsite
