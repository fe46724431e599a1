// The parameter-layout cache (see param_layouts.h).
#define __CUDA_API_VERSION_INTERNAL 1
#include "interpose/param_layouts.h"

#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "interpose/unhooked_function.h"

namespace spillway::interpose {
namespace {

using ParamInfoFn = CUresult (*)(CUfunction, size_t, size_t*, size_t*);
using KernelParamInfoFn = CUresult (*)(CUkernel, size_t, size_t*, size_t*);

constinit UnhookedFunction g_param_info{"cuFuncGetParamInfo", 12040};
constinit UnhookedFunction g_kernel_param_info{"cuKernelGetParamInfo", 12040};

// The layout cache. Layouts are handed out as stable pointers, so none is ever freed: forgetting
// them (after a module or library unload, when a new function may get a freed one's handle) only
// starts a new generation, and a launch on another thread keeps using the layout it holds.
struct Layouts {
  struct Entry {
    const std::vector<policy::ParamInfo>* layout;  // interned; null: the driver could not tell
    uint64_t generation;                           // an entry of an older generation is forgotten
  };
  struct ByContent {
    bool operator()(const std::vector<policy::ParamInfo>& a,
                    const std::vector<policy::ParamInfo>& b) const {
      return std::lexicographical_compare(
          a.begin(), a.end(), b.begin(), b.end(),
          [](const policy::ParamInfo& x, const policy::ParamInfo& y) {
            return x.offset != y.offset ? x.offset < y.offset : x.size < y.size;
          });
    }
  };
  std::mutex mutex;
  std::unordered_map<void*, Entry> by_function;  // guarded by mutex
  // Every layout read, once each: entries point into it (a set's elements never move).
  std::set<std::vector<policy::ParamInfo>, ByContent> interned;  // guarded by mutex
  uint64_t generation = 0;                                       // guarded by mutex
  // Changed under mutex; read without it by UnloadInFlight (once a launch in record mode).
  std::atomic<int> unloads_in_flight{0};
};
Layouts& LayoutCache() {
  static Layouts* layouts = new Layouts;
  return *layouts;
}

// Appends what `param_info` says of `handle`'s parameters, from index 0 up to the first it refuses.
template <typename Fn, typename Handle>
void AppendLayout(Fn param_info, Handle handle, std::vector<policy::ParamInfo>* layout) {
  for (size_t i = 0; i < 4096; ++i) {
    size_t offset = 0, size = 0;
    if (param_info(handle, i, &offset, &size) != CUDA_SUCCESS) return;
    layout->push_back(policy::ParamInfo{offset, size});
  }
}

// The layout of launch handle `function` from the driver; empty when it has no parameters or the
// driver cannot say. cuLaunchKernel takes a CUfunction or a CUkernel cast to one (what the CUDA
// runtime launches); cuFuncGetParamInfo documents a CUfunction only and may refuse a CUkernel, so
// a handle it refuses at index 0 (with whatever error: cuda.h lists only CUDA_ERROR_INVALID_VALUE,
// which a function without parameters gets too) is asked of cuKernelGetParamInfo as a CUkernel.
// The answer is cached, so that is one more call per such handle.
std::vector<policy::ParamInfo> ReadLayout(void* function) {
  std::vector<policy::ParamInfo> layout;
  if (const auto param_info = Lookup<ParamInfoFn>(g_param_info)) {
    AppendLayout(param_info, static_cast<CUfunction>(function), &layout);
  }
  if (layout.empty()) {
    if (const auto kernel_param_info = Lookup<KernelParamInfoFn>(g_kernel_param_info)) {
      AppendLayout(kernel_param_info, static_cast<CUkernel>(function), &layout);
    }
  }
  return layout;
}

}  // namespace

const std::vector<policy::ParamInfo>* ParamLayoutOf(void* function) {
  Layouts& cache = LayoutCache();
  uint64_t generation = 0;
  {
    std::lock_guard lock(cache.mutex);
    generation = cache.generation;
    const auto it = cache.by_function.find(function);
    if (cache.unloads_in_flight == 0 && it != cache.by_function.end() &&
        it->second.generation == generation) {
      return it->second.layout;
    }
  }
  // No parameters, or the driver cannot say: either way nothing to resolve by layout (null).
  std::vector<policy::ParamInfo> read = ReadLayout(function);
  std::lock_guard lock(cache.mutex);
  const std::vector<policy::ParamInfo>* layout =
      read.empty() ? nullptr : &*cache.interned.insert(std::move(read)).first;
  // Read during or across an unload, `function` may be the unloaded one's: used, not cached.
  if (cache.unloads_in_flight == 0 && cache.generation == generation) {
    cache.by_function.insert_or_assign(function, Layouts::Entry{layout, generation});
  }
  return layout;
}

void BeginUnload() {
  Layouts& cache = LayoutCache();
  std::lock_guard lock(cache.mutex);
  ++cache.unloads_in_flight;
}

void EndUnload() {
  Layouts& cache = LayoutCache();
  std::lock_guard lock(cache.mutex);
  ++cache.generation;  // entries are replaced as they are next read
  --cache.unloads_in_flight;
}

bool UnloadInFlight() {
  return LayoutCache().unloads_in_flight.load(std::memory_order_acquire) != 0;
}

}  // namespace spillway::interpose
