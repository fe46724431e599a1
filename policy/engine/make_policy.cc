// The eviction policies by name (eviction_policy.h's MakePolicy): in a file of its own, so that no
// policy's source depends on another's.
#include <memory>
#include <string_view>

#include "policy/engine/eviction_policy.h"

namespace spillway::policy {

std::unique_ptr<EvictionPolicy> MakePolicy(std::string_view name) {
  if (name == "lru") return MakeLruPolicy();
  if (name == "learned") return MakeLearnedPolicy();
  if (name == "none") return MakeNoMovePolicy();
  return nullptr;
}

}  // namespace spillway::policy
