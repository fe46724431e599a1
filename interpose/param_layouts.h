// The parameter layout of each launch handle, read from the driver once and cached: what a
// launch's access set is resolved with (policy/front_door.h), and forgotten around module and
// library unloads, after which a new function may get an unloaded one's handle.
#ifndef SPILLWAY_INTERPOSE_PARAM_LAYOUTS_H_
#define SPILLWAY_INTERPOSE_PARAM_LAYOUTS_H_

#include <vector>

#include "policy/front_door.h"

namespace spillway::interpose {

// The parameter layout of launch handle `function` (a CUfunction, or a CUkernel cast to one) from
// cuFuncGetParamInfo, or cuKernelGetParamInfo where that refuses the handle, cached; null when the
// driver cannot tell. The returned layout lives for the rest of the process.
const std::vector<policy::ParamInfo>* ParamLayoutOf(void* function);

// Around a module's or library's unload (the real call between them): a function loaded later may
// get an unloaded one's handle. While an unload is under way no cached layout is used or made;
// after it, every cached layout is forgotten. Layouts already returned stay valid.
void BeginUnload();
void EndUnload();
// True while an unload is under way (what is cached by function handle may be stale).
bool UnloadInFlight();

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_PARAM_LAYOUTS_H_
