// Lookups over the hooked-function list.
#include "interpose/hook_table.h"

namespace spillway::interpose {

std::optional<HookId> FindHook(std::string_view name) {
  for (int i = 0; i < kNumHooks; ++i) {
    if (kHookInfo[i].name == name) return static_cast<HookId>(i);
  }
  return std::nullopt;
}

}  // namespace spillway::interpose
