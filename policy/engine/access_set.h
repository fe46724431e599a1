// Access-set resolution: which live allocations a kernel launch can touch. Pointer detection is by
// value: every 8-byte-aligned word of the parameter buffer that points into a live allocation
// (interior pointers included) names that allocation. Pointers stored in device memory are
// invisible here; demand paging of managed memory covers them.
#ifndef SPILLWAY_POLICY_ENGINE_ACCESS_SET_H_
#define SPILLWAY_POLICY_ENGINE_ACCESS_SET_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "policy/engine/allocation_registry.h"

namespace spillway::policy {

// One kernel parameter as cuFuncGetParamInfo reports it.
struct ParamInfo {
  uint64_t offset = 0;
  uint64_t size = 0;
};

// The distinct allocations a launch may touch, in the order first seen.
using AccessSet = std::vector<Allocation>;

// Each form can also hand back the candidate pointer words it looked up (`words`, when not null:
// cleared, then the non-zero 8-byte words in parameter order), so the engine can tell which part of
// a large allocation an interior pointer names.

// The kernelParams form: kernel_params[i] points at parameter i, laid out per `layout`.
// REQUIRES: kernel_params has layout.size() entries (or is null: empty result).
void ResolveFromKernelParams(const AllocationRegistry& registry,
                             const std::vector<ParamInfo>& layout, void* const* kernel_params,
                             AccessSet* out, std::vector<uint64_t>* words = nullptr);

// A packed parameter buffer of `size` bytes (the `extra` form's CU_LAUNCH_PARAM_BUFFER_POINTER).
void ResolveFromBuffer(const AllocationRegistry& registry, const void* buffer, size_t size,
                       AccessSet* out, std::vector<uint64_t>* words = nullptr);

// The `extra` array of cuLaunchKernel: {CU_LAUNCH_PARAM_BUFFER_POINTER (1), ptr,
// CU_LAUNCH_PARAM_BUFFER_SIZE (2), &size, CU_LAUNCH_PARAM_END (0)}, in any order. False when the
// array names no buffer with a size (nothing resolved).
bool ResolveFromExtra(const AllocationRegistry& registry, void* const* extra, AccessSet* out,
                      std::vector<uint64_t>* words = nullptr);

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_ENGINE_ACCESS_SET_H_
