// The seam between the C API and the CUDA kernels: the API validates, then calls one of these.
// Built from the .cu launchers when nvcc is present, from launch_unavailable.cc otherwise; tests
// link a recording fake to prove invalid calls never reach a launch.
#ifndef SPILLWAY_ATTENTION_KERNELS_SRC_LAUNCH_H_
#define SPILLWAY_ATTENTION_KERNELS_SRC_LAUNCH_H_

#include <cstddef>

#include "attention_kernels/src/validate.h"
#include "spillway/attention.h"

namespace spillway::attention::detail {

bool KernelsAvailable();

// REQUIRES: args validated; workspace at least the reported size. Each returns the errors of its
// own CUDA calls only (never the thread's last error, see attention.h).
Check LaunchSdpaForward(const spillway_attention_sdpa_forward_args_t& args, float scale,
                        void* workspace, void* stream);
Check LaunchSdpaBackward(const spillway_attention_sdpa_backward_args_t& args, float scale,
                         void* workspace, void* stream);
Check LaunchAdditiveForward(const spillway_attention_additive_forward_args_t& args, void* workspace,
                            void* stream);
Check LaunchAdditiveBackward(const spillway_attention_additive_backward_args_t& args,
                             void* workspace, void* stream);

// Copies `bytes` from device memory to `host` in order on `stream`, then waits for the stream.
Check CopyToHost(void* host, const void* device, std::size_t bytes, void* stream);

}  // namespace spillway::attention::detail

#endif  // SPILLWAY_ATTENTION_KERNELS_SRC_LAUNCH_H_
