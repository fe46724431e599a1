// What every hook file shares (hooks.cc generates the hooks; hooks_alloc.h, hooks_context.h,
// hooks_graph.h, hooks_launch.h and hooks_copy.h say what some of them do): the two points a
// hook is customized at, per function, After<id> and Replace<id>, and SPILLWAY_REPORT_ONCE.
// Included by hooks.cc only.
#ifndef SPILLWAY_INTERPOSE_HOOKS_COMMON_H_
#define SPILLWAY_INTERPOSE_HOOKS_COMMON_H_

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>

#include "interpose/backing.h"
#include "interpose/context_end.h"
#include "interpose/driver_device.h"
#include "interpose/graph_hooks.h"
#include "interpose/hook_table.h"
#include "interpose/launch_prep.h"
#include "interpose/log.h"
#include "interpose/real_driver.h"
#include "interpose/record_hooks.h"
#include "interpose/recorder.h"
#include "interpose/runtime.h"

namespace spillway::interpose {

// What a hook does after the real call returned, per function. Default: nothing.
template <HookId id>
struct After {
  template <typename... Args>
  static void Run(CUresult, Args...) {}
};

// What a hook does instead of the plain forward in run/record mode, per function. Default: none.
// Run(real, args...) makes the real call(s) itself and returns the result.
template <HookId id>
struct Replace {
  static constexpr bool kActive = false;
};

}  // namespace spillway::interpose

// Says `format` once per `flag` (and keeps it for the summary's errors).
#define SPILLWAY_REPORT_ONCE(flag, ...)                    \
  do {                                                     \
    static constinit std::atomic<bool> flag{false};        \
    if (!flag.exchange(true, std::memory_order_relaxed)) { \
      ReportProblem(LogLevel::kWarn, __VA_ARGS__);         \
    }                                                      \
  } while (0)

#endif  // SPILLWAY_INTERPOSE_HOOKS_COMMON_H_
