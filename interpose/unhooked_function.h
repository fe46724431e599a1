// Driver functions the shim calls but does not hook (prefetch, discard, pools, events, ...): each
// is looked up once through the real cuGetProcAddress at the CUDA 13.0 ABI, lazily, from any
// thread, with no lock.
#ifndef SPILLWAY_INTERPOSE_UNHOOKED_FUNCTION_H_
#define SPILLWAY_INTERPOSE_UNHOOKED_FUNCTION_H_

#include <atomic>

namespace spillway::interpose {

struct UnhookedFunction {
  const char* name;
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
