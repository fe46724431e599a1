// What the shim needs to know when a context ends (cuCtxDestroy, a primary context's reset or its
// last release): the driver frees the context's memory and destroys its streams and events, so
// runtime.cc retires the engines that started in it and forgets the allocations made in it
// (OnContextEnded). Here: the driver's answers (current context, a primary context's handle and
// state) and a count of ends per context handle, by which what is kept per handle (stand-in
// streams, a thread's events) is known to be stale.
#ifndef SPILLWAY_INTERPOSE_CONTEXT_END_H_
#define SPILLWAY_INTERPOSE_CONTEXT_END_H_

#include <cuda.h>

#include <cstdint>

namespace spillway::interpose {

// The calling thread's current context, or null (none, or the driver cannot say).
CUcontext CurrentContextHandle();

// Device `device`'s primary context while it is active, else null. Retains and releases it
// (real calls) to learn its handle: while it is active that changes nothing, as the caller holds
// a reference of its own when it releases or resets it.
CUcontext ActivePrimaryContext(int device);

// True when the driver says device `device`'s primary context is not active: a release that
// succeeded was its last one.
bool PrimaryContextInactive(int device);

// Counts an end of `context`. ContextEnds(context) changes after it (and may change after other
// contexts' ends too: the counts are kept in a few slots by handle). No requirement.
void NoteContextEnded(CUcontext context);
uint64_t ContextEnds(CUcontext context);

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_CONTEXT_END_H_
