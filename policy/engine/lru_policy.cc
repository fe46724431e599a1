// The lru eviction policy: victims in recency order, oldest first.
#include "policy/engine/eviction_policy.h"
#include "policy/engine/recency_order.h"

namespace spillway::policy {
namespace {

class LruPolicy final : public EvictionPolicy {
 public:
  std::string_view name() const override { return "lru"; }

  void Touch(uint64_t id) override { order_.Touch(id); }
  void Forget(uint64_t id) override { order_.Forget(id); }

  uint64_t PickVictim(bool (*evictable)(const void*, uint64_t), const void* context) override {
    for (const uint64_t id : order_) {
      if (evictable(context, id)) return id;
    }
    return 0;
  }

 private:
  RecencyOrder order_;
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakeLruPolicy() { return std::make_unique<LruPolicy>(); }

}  // namespace spillway::policy
