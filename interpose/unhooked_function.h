// Driver functions the shim calls but does not hook (prefetch, discard, pools, events, ...): each
// is looked up once through the real cuGetProcAddress, lazily, from any thread, with no lock, at
// the CUDA version whose signature its caller's typedef has.
#ifndef SPILLWAY_INTERPOSE_UNHOOKED_FUNCTION_H_
#define SPILLWAY_INTERPOSE_UNHOOKED_FUNCTION_H_

#include <atomic>

namespace spillway::interpose {

struct UnhookedFunction {
  const char* name;
  // The cudaVersion passed to cuGetProcAddress: the NNNNN of cudaTypedefs.h's PFN_<name>_vNNNNN
  // whose signature the caller casts the answer to. The driver answers with the newest variant
  // not newer than this, so a newer driver never hands back a changed signature (cuCtxGetDevice
  // at 13000 is cuCtxGetDevice_v2, which takes a context too); an older driver that lacks the
  // variant answers with nothing.
  int version;
  // When not 0: an older variant with the same signature, asked for where the driver lacks
  // `version` (cuEventElapsedTime: 12080 where the driver is 12.8 or later, else 2000).
  int fallback_version = 0;
  std::atomic<int> state{0};  // 0 unresolved, 1 resolved
  std::atomic<void*> function{nullptr};
};

// The function's address, or null when the driver (or its cuGetProcAddress) lacks it.
void* ResolveUnhooked(UnhookedFunction& function);

template <typename Fn>
Fn Lookup(UnhookedFunction& function) {
  return reinterpret_cast<Fn>(ResolveUnhooked(function));
}

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_UNHOOKED_FUNCTION_H_
