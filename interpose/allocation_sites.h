// Call sites of allocations in a run, for policy-file rules by call_site or module
// (docs/policy.md): the calling stack less the shim's own frames, named by the id a recorded trace
// gives the same stack (trace::HashCallSite over the modules' build-ids and the offsets, so the
// same binaries give the same id in every run), and the paths of the modules on it. Stacks are
// walked with libunwind (profiler/callsite/unwinder.h, loaded privately); without it there are
// none.
#ifndef SPILLWAY_INTERPOSE_ALLOCATION_SITES_H_
#define SPILLWAY_INTERPOSE_ALLOCATION_SITES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace spillway::interpose {

// Loads the stack walk and readies the table: call while the library initializes, not from a hook
// (dlopen takes the loader lock). True when call sites can be taken.
bool PrepareAllocationSites();

// The calling thread's call site: its stack's id, dropping the leading frames inside the object
// that contains `skip_object_of` (the shim; null keeps them all). 0 when no stack can be taken
// (PrepareAllocationSites not called, or it failed). Thread-safe; a site seen before costs a walk
// and a lookup.
uint64_t AllocationCallSite(const void* skip_object_of);

// The paths of the modules on the stack of `call_site` (an AllocationCallSite result), innermost
// first, each once; empty for a site not seen. Thread-safe.
std::vector<std::string> CallSiteModules(uint64_t call_site);

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_ALLOCATION_SITES_H_
