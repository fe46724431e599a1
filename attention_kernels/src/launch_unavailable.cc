// Launchers for a build without nvcc: every launch reports SPILLWAY_ATTENTION_ERROR_NOT_BUILT,
// so the API, validation and the CPU reference stay usable and testable.
#include "attention_kernels/src/launch.h"

namespace spillway::attention::detail {
namespace {

Check NotBuilt() {
  return {SPILLWAY_ATTENTION_ERROR_NOT_BUILT,
          "spillway attention was built without nvcc: no CUDA kernels in this library"};
}

}  // namespace

bool KernelsAvailable() { return false; }

Check LaunchSdpaForward(const spillway_attention_sdpa_forward_args_t&, float, void*, void*) {
  return NotBuilt();
}
Check LaunchSdpaBackward(const spillway_attention_sdpa_backward_args_t&, float, void*, void*) {
  return NotBuilt();
}
Check LaunchAdditiveForward(const spillway_attention_additive_forward_args_t&, void*, void*) {
  return NotBuilt();
}
Check LaunchAdditiveBackward(const spillway_attention_additive_backward_args_t&, void*, void*) {
  return NotBuilt();
}
Check CopyToHost(void*, const void*, std::size_t, void*) { return NotBuilt(); }

}  // namespace spillway::attention::detail
