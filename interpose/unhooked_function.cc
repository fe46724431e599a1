// Lookup of driver functions the shim does not hook (unhooked_function.h).
#define __CUDA_API_VERSION_INTERNAL 1
#include "interpose/unhooked_function.h"

#include <cuda.h>

#include "interpose/hook_table.h"
#include "interpose/real_driver.h"

namespace spillway::interpose {

void* ResolveUnhooked(UnhookedFunction& function) {
  using ProcAddressFn =
      CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  if (function.state.load(std::memory_order_acquire) == 0) {
    const auto get =
        reinterpret_cast<ProcAddressFn>(RealFunction(Index(HookId::k_cuGetProcAddress_v2)));
    // A driver before CUDA 12.0 has only the first cuGetProcAddress (from 11.3).
    using FirstProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t);
    const auto get_first =
        reinterpret_cast<FirstProcAddressFn>(RealFunction(Index(HookId::k_cuGetProcAddress)));
    const auto at = [&](int version) -> void* {
      void* found = nullptr;
      CUdriverProcAddressQueryResult status;
      const CUresult result =
          get != nullptr ? get(function.name, &found, version, CU_GET_PROC_ADDRESS_DEFAULT, &status)
          : get_first != nullptr
              ? get_first(function.name, &found, version, CU_GET_PROC_ADDRESS_DEFAULT)
              : CUDA_ERROR_NOT_FOUND;
      return result == CUDA_SUCCESS ? found : nullptr;
    };
    void* found = at(function.version);
    if (found == nullptr && function.fallback_version != 0) found = at(function.fallback_version);
    function.function.store(found, std::memory_order_relaxed);
    function.state.store(1, std::memory_order_release);
  }
  return function.function.load(std::memory_order_relaxed);
}

}  // namespace spillway::interpose
