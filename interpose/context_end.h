// What the driver says when a context ends (cuCtxDestroy, a primary context's reset or its last
// release): which context is current, whether a primary context is still active, and whether an
// allocation the shim recorded still exists. The driver frees an ended context's memory and
// destroys its streams and events; runtime.cc retires the engines that started in it and drops
// the allocations it freed (OnContextEnded).
#ifndef SPILLWAY_INTERPOSE_CONTEXT_END_H_
#define SPILLWAY_INTERPOSE_CONTEXT_END_H_

#include <cuda.h>

#include <cstdint>

namespace spillway::interpose {

// Context ends so far (counted by NoteContextEnded): what is kept per context handle (stand-in
// streams, a thread's events) is made again after one, as a new context may have an ended one's
// handle, and a primary context keeps its handle across its reset. No requirement.
void NoteContextEnded();
uint64_t ContextEndsSoFar();

// The calling thread's current context, or null (none, or the driver cannot say).
CUcontext CurrentContextHandle();

// True when the driver says device `device`'s primary context is not active: a release that
// succeeded was its last one.
bool PrimaryContextInactive(int device);

// What the driver says of the allocation that started at `base`: still there (kLive), freed or
// now inside another allocation (kGone), or it cannot say (kUnknown: no current context, or the
// driver lacks the call).
enum class AllocationState { kLive, kGone, kUnknown };
AllocationState DriverAllocationState(uint64_t base);

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_CONTEXT_END_H_
