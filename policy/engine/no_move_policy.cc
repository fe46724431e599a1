// The `none` eviction policy: allocations stay managed but the engine moves nothing (no prefetch,
// eviction or discard); the driver pages on demand. Plain unified memory, as a baseline.
#include "policy/engine/eviction_policy.h"

namespace spillway::policy {
namespace {

class NoMovePolicy final : public EvictionPolicy {
 public:
  std::string_view name() const override { return "none"; }
  bool MovesData() const override { return false; }
  void Touch(uint64_t /*id*/) override {}
  void Forget(uint64_t /*id*/) override {}
  uint64_t PickVictim(bool (* /*evictable*/)(const void*, uint64_t),
                      const void* /*context*/) override {
    return 0;
  }
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakeNoMovePolicy() { return std::make_unique<NoMovePolicy>(); }

}  // namespace spillway::policy
