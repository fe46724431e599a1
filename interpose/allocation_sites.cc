// Allocation call sites in a run (see allocation_sites.h): one call-site table whose sink names
// each new stack as the trace writer would and keeps its modules' paths.
#include "interpose/allocation_sites.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "profiler/callsite/call_site_table.h"
#include "profiler/callsite/unwinder.h"
#include "profiler/trace/trace_records.h"

namespace spillway::interpose {
namespace {

// Names sites with trace::HashCallSite. The table calls it under its lock, so `modules_` needs no
// other; the sites' module paths are read from other threads under `paths_mutex_`.
class TraceIdSink final : public callsite::CallSiteSink {
 public:
  uint32_t OnModule(const callsite::ModuleInfo& info) override {
    modules_.push_back(info);
    return static_cast<uint32_t>(modules_.size());
  }

  uint64_t OnCallSite(uint64_t, std::span<const callsite::Frame> frames) override {
    trace::Frame converted[trace::kMaxFrames];
    const size_t count = std::min(frames.size(), trace::kMaxFrames);
    std::vector<std::string> paths;
    for (size_t i = 0; i < count; ++i) {
      converted[i] = {frames[i].module, frames[i].offset};
      const callsite::ModuleInfo* module = Module(frames[i].module);
      if (module != nullptr && std::find(paths.begin(), paths.end(), module->path) == paths.end()) {
        paths.push_back(module->path);
      }
    }
    const uint64_t id =
        trace::HashCallSite(absl::MakeConstSpan(converted, count), [this](trace::ModuleId module) {
          const callsite::ModuleInfo* info = Module(module);
          return info != nullptr ? absl::string_view(info->build_id) : absl::string_view();
        });
    absl::MutexLock lock(&paths_mutex_);
    paths_.try_emplace(id, std::move(paths));
    return id;
  }

  std::vector<std::string> Paths(uint64_t site) {
    absl::MutexLock lock(&paths_mutex_);
    const auto it = paths_.find(site);
    return it == paths_.end() ? std::vector<std::string>() : it->second;
  }

 private:
  const callsite::ModuleInfo* Module(uint32_t id) const {
    return id >= 1 && id <= modules_.size() ? &modules_[id - 1] : nullptr;
  }

  std::vector<callsite::ModuleInfo> modules_;  // by id - 1
  absl::Mutex paths_mutex_;
  absl::flat_hash_map<uint64_t, std::vector<std::string>> paths_ ABSL_GUARDED_BY(paths_mutex_);
};

// Never freed: allocations are made and freed from exit paths too.
callsite::CallSiteTable* g_table = nullptr;
TraceIdSink* g_sink = nullptr;
std::atomic<bool> g_ready{false};

void BeforeFork() { g_table->LockForFork(); }
void AfterForkInParent() { g_table->UnlockInParent(); }
void AfterForkInChild() { g_table->ResetInChild(); }

}  // namespace

bool PrepareAllocationSites() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!callsite::UnwinderAvailable()) return;
    g_table = new callsite::CallSiteTable;
    g_sink = new TraceIdSink;
    pthread_atfork(BeforeFork, AfterForkInParent, AfterForkInChild);
    g_ready.store(true, std::memory_order_release);
  });
  return g_ready.load(std::memory_order_acquire);
}

uint64_t AllocationCallSite(const void* skip_object_of) {
  if (!g_ready.load(std::memory_order_acquire)) return 0;
  return g_table->Capture(skip_object_of, g_sink);
}

std::vector<std::string> CallSiteModules(uint64_t call_site) {
  if (!g_ready.load(std::memory_order_acquire)) return {};
  return g_sink->Paths(call_site);
}

}  // namespace spillway::interpose
