// The driver's answers about ended contexts and the allocations they freed (context_end.h).
#include "interpose/context_end.h"

#include <atomic>

#include "interpose/unhooked_function.h"

namespace spillway::interpose {
namespace {

constinit UnhookedFunction g_ctx_get_current{"cuCtxGetCurrent", 4000};
constinit UnhookedFunction g_primary_state{"cuDevicePrimaryCtxGetState", 7000};
constinit UnhookedFunction g_address_range{"cuMemGetAddressRange", 3020};

constinit std::atomic<uint64_t> g_context_ends{0};

}  // namespace

void NoteContextEnded() { g_context_ends.fetch_add(1, std::memory_order_acq_rel); }

uint64_t ContextEndsSoFar() { return g_context_ends.load(std::memory_order_acquire); }

CUcontext CurrentContextHandle() {
  const auto get = Lookup<CUresult (*)(CUcontext*)>(g_ctx_get_current);
  CUcontext context = nullptr;
  if (get == nullptr || get(&context) != CUDA_SUCCESS) return nullptr;
  return context;
}

bool PrimaryContextInactive(int device) {
  const auto get = Lookup<CUresult (*)(CUdevice, unsigned int*, int*)>(g_primary_state);
  unsigned int flags = 0;
  int active = 1;
  return get != nullptr && get(device, &flags, &active) == CUDA_SUCCESS && active == 0;
}

AllocationState DriverAllocationState(uint64_t base) {
  const auto get = Lookup<CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr)>(g_address_range);
  if (get == nullptr) return AllocationState::kUnknown;
  CUdeviceptr found = 0;
  size_t size = 0;
  switch (get(&found, &size, base)) {
    case CUDA_SUCCESS:
      return found == base ? AllocationState::kLive : AllocationState::kGone;
    case CUDA_ERROR_NOT_FOUND:
    case CUDA_ERROR_INVALID_VALUE:
      return AllocationState::kGone;
    default:
      return AllocationState::kUnknown;
  }
}

}  // namespace spillway::interpose
