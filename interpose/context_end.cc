// The driver's answers about contexts that end, and the count of their ends (context_end.h).
#include "interpose/context_end.h"

#include <atomic>
#include <cstddef>
#include <functional>

#include "interpose/unhooked_function.h"

namespace spillway::interpose {
namespace {

constinit UnhookedFunction g_ctx_get_current{"cuCtxGetCurrent", 4000};
constinit UnhookedFunction g_primary_state{"cuDevicePrimaryCtxGetState", 7000};
constinit UnhookedFunction g_primary_retain{"cuDevicePrimaryCtxRetain", 7000};
// At 11000 the _v2 variant, which the shim hooks: this lookup gets the driver's own.
constinit UnhookedFunction g_primary_release{"cuDevicePrimaryCtxRelease", 11000};

// Ends counted by handle, in slots a handle hashes to: two handles sharing a slot only make
// stale what is not (made again, never used wrongly).
constexpr size_t kEndSlots = 256;
constinit std::atomic<uint64_t> g_ends[kEndSlots] = {};

std::atomic<uint64_t>& SlotOf(CUcontext context) {
  return g_ends[std::hash<const void*>{}(context) % kEndSlots];
}

}  // namespace

CUcontext CurrentContextHandle() {
  const auto get = Lookup<CUresult (*)(CUcontext*)>(g_ctx_get_current);
  CUcontext context = nullptr;
  if (get == nullptr || get(&context) != CUDA_SUCCESS) return nullptr;
  return context;
}

CUcontext ActivePrimaryContext(int device) {
  const auto state = Lookup<CUresult (*)(CUdevice, unsigned int*, int*)>(g_primary_state);
  const auto retain = Lookup<CUresult (*)(CUcontext*, CUdevice)>(g_primary_retain);
  const auto release = Lookup<CUresult (*)(CUdevice)>(g_primary_release);
  unsigned int flags = 0;
  int active = 0;
  if (state == nullptr || retain == nullptr || release == nullptr ||
      state(device, &flags, &active) != CUDA_SUCCESS || active == 0) {
    return nullptr;
  }
  CUcontext context = nullptr;
  if (retain(&context, device) != CUDA_SUCCESS) return nullptr;
  release(device);
  return context;
}

bool PrimaryContextInactive(int device) {
  const auto get = Lookup<CUresult (*)(CUdevice, unsigned int*, int*)>(g_primary_state);
  unsigned int flags = 0;
  int active = 1;
  return get != nullptr && get(device, &flags, &active) == CUDA_SUCCESS && active == 0;
}

void NoteContextEnded(CUcontext context) {
  SlotOf(context).fetch_add(1, std::memory_order_acq_rel);
}

uint64_t ContextEnds(CUcontext context) { return SlotOf(context).load(std::memory_order_acquire); }

}  // namespace spillway::interpose
