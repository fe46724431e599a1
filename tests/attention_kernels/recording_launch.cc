// Recording launchers for the CPU tests (see recording_launch.h): every launch succeeds without
// touching a GPU and is counted.
#include "tests/attention_kernels/recording_launch.h"

#include "attention_kernels/src/launch.h"

namespace spillway::attention {
namespace {
int launches = 0;
}  // namespace

namespace testing {
int LaunchCount() { return launches; }
void ResetLaunchCount() { launches = 0; }
}  // namespace testing

namespace detail {

bool KernelsAvailable() { return false; }

Check LaunchSdpaForward(const spillway_attention_sdpa_forward_args_t&, float, void*) {
  ++launches;
  return {};
}
Check LaunchSdpaBackward(const spillway_attention_sdpa_backward_args_t&, float, void*, void*) {
  ++launches;
  return {};
}
Check LaunchAdditiveForward(const spillway_attention_additive_forward_args_t&, void*) {
  ++launches;
  return {};
}
Check LaunchAdditiveBackward(const spillway_attention_additive_backward_args_t&, void*, void*) {
  ++launches;
  return {};
}

}  // namespace detail
}  // namespace spillway::attention
