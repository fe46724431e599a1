// Recording launchers for the CPU tests (see recording_launch.h): every launch succeeds without
// touching a GPU and is counted; device-to-host copies read host memory.
#include "tests/attention_kernels/recording_launch.h"

#include <cstring>

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

Check LaunchSdpaForward(const spillway_attention_sdpa_forward_args_t&, float, void*, void*) {
  ++launches;
  return {};
}
Check LaunchSdpaBackward(const spillway_attention_sdpa_backward_args_t&, float, void*, void*) {
  ++launches;
  return {};
}
Check LaunchAdditiveForward(const spillway_attention_additive_forward_args_t&, void*, void*) {
  ++launches;
  return {};
}
Check LaunchAdditiveBackward(const spillway_attention_additive_backward_args_t&, void*, void*) {
  ++launches;
  return {};
}
// The tests' "device" memory is host memory.
Check CopyToHost(void* host, const void* device, std::size_t bytes, void*) {
  std::memcpy(host, device, bytes);
  return {};
}

}  // namespace detail
}  // namespace spillway::attention
