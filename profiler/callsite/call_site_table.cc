// CallSiteTable: resolve the walked frames, drop the recorder's own, hash, define once.
#include "profiler/callsite/call_site_table.h"

#include <algorithm>

#include "profiler/callsite/unwinder.h"

namespace spillway::callsite {
namespace {

constexpr int kMaxFrames = 64;
constexpr int kMaxWalk = 96;  // frames walked: room for the skipped ones

}  // namespace

CallSiteTable::CallSiteTable(int max_frames) : max_frames_(std::clamp(max_frames, 1, kMaxFrames)) {}

uint64_t CallSiteTable::Capture(const void* skip_object_of, CallSiteSink* sink) {
  if (!UnwinderAvailable()) return kNoCallSite;
  // One more slot than walked for the address whose object is skipped.
  void* pcs[kMaxWalk + 1];
  const int count = Backtrace(pcs, std::min(kMaxWalk, max_frames_ + 32));
  Location where[kMaxWalk + 1];
  int resolved = count;
  if (skip_object_of != nullptr) pcs[resolved++] = const_cast<void*>(skip_object_of);
  modules_.Resolve(pcs, resolved, where);
  int first = 0;
  if (skip_object_of != nullptr && where[count].module != ModuleMap::kUnknownModule) {
    while (first < count && where[first].module == where[count].module) ++first;
  }
  return InternResolved(where + first, std::min(count - first, max_frames_), sink);
}

uint64_t CallSiteTable::Intern(void* const* pcs, int count, CallSiteSink* sink) {
  count = std::min(count, kMaxFrames);
  if (count <= 0) return kNoCallSite;
  Location where[kMaxFrames];
  modules_.Resolve(pcs, count, where);
  return InternResolved(where, count, sink);
}

uint64_t CallSiteTable::InternResolved(const Location* where, int count, CallSiteSink* sink) {
  if (count <= 0) return kNoCallSite;
  // The id: each frame's module key (a hash of its build-id) and offset, hashed in order.
  uint64_t id = 0xcbf29ce484222325ull;
  for (int i = 0; i < count; ++i) {
    id = HashWord(HashWord(id, where[i].key), where[i].offset);
  }
  if (id == kNoCallSite) id = 1;
  std::lock_guard lock(mutex_);
  if (const auto known = sites_.find(id); known != sites_.end()) return known->second;
  Frame frames[kMaxFrames];
  for (int i = 0; i < count; ++i) {
    const uint32_t module = where[i].module;
    if (module == ModuleMap::kUnknownModule) {
      frames[i] = Frame{0, where[i].offset};
      continue;
    }
    if (module_ids_.size() <= module) module_ids_.resize(module + 1, 0);
    if (module_ids_[module] == 0) {
      module_ids_[module] = sink != nullptr ? sink->OnModule(modules_.Module(module)) : module + 1;
    }
    frames[i] = Frame{module_ids_[module], where[i].offset};
  }
  const uint64_t named =
      sink != nullptr ? sink->OnCallSite(id, std::span<const Frame>(frames, count)) : id;
  sites_.emplace(id, named);
  return named;
}

void CallSiteTable::LockForFork() {
  mutex_.lock();
  modules_.LockForFork();
}

void CallSiteTable::UnlockInParent() {
  modules_.UnlockAfterFork();
  mutex_.unlock();
}

void CallSiteTable::ResetInChild() {
  sites_.clear();
  module_ids_.clear();
  modules_.UnlockAfterFork();
  mutex_.unlock();
}

}  // namespace spillway::callsite
